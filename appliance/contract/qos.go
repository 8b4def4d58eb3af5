package contract

import "fmt"

// Bounds of a volume's (or a mapping's) QoS limits, the same for the
// gateway that enforces them and every client that checks them first (the
// plugin server's in-memory array, the UI's form): 0 means unlimited.
const (
	MaxIOPSLimit = 10_000_000
	// MinBandwidthLimit: below one 64 KiB request per second a limit only
	// stalls a host.
	MinBandwidthLimit = 64 << 10
	MaxBandwidthLimit = 1 << 40
)

// CheckQoS validates an IOPS limit (I/Os per second) and a bandwidth limit
// (bytes per second); what names the object in the message.
func CheckQoS(what string, iops, bandwidth int64) error {
	if iops < 0 || iops > MaxIOPSLimit {
		return fmt.Errorf("%s: iops_limit %d must be 0 (unlimited) or 1 to %d I/Os per second", what, iops, MaxIOPSLimit)
	}
	if bandwidth != 0 && (bandwidth < MinBandwidthLimit || bandwidth > MaxBandwidthLimit) {
		return fmt.Errorf("%s: bandwidth_limit %d must be 0 (unlimited) or %d to %d bytes per second (e.g. 104857600 for 100 MiB/s)", what, bandwidth, MinBandwidthLimit, int64(MaxBandwidthLimit))
	}
	return nil
}

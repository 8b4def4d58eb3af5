package model

import "time"

// FrontendStats is published by each running frontend process (an NBD
// server, an iSCSI target) every few seconds under a lease, at
// FrontendStatsKey(Instance). Format v1. Volumes holds, by volume id, the
// I/O the frontend served to hosts: counts, latency from the request's
// arrival at the volume to its answer (QoS waits included) and the time
// QoS limits held requests back.
type FrontendStats struct {
	// Instance is random per process start: counters start from zero
	// with it.
	Instance string `json:"instance"`
	Kind     string `json:"kind"` // "nbd" or "iscsi"
	// HostID is the host an NBD server serves; empty for an iSCSI target
	// (TCMU does not say which initiator sent a command).
	HostID  string                `json:"host_id,omitempty"`
	Started time.Time             `json:"started"`
	Time    time.Time             `json:"time"`
	Volumes map[string]IOCounters `json:"volumes"`
}

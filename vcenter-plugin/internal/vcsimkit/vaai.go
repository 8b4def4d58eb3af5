package vcsimkit

import "github.com/vmware/govmomi/vim25/types"

// VAAI status of the Cairn LUNs a host discovers. ESXi probes a device's
// hardware acceleration (ATS, XCOPY, WRITE SAME) when it claims it and
// reports the result as ScsiLun.vStorageSupport: vStorageSupported only
// when every primitive works. A device whose ATS probe failed is
// vStorageUnsupported, and VMFS created on it is not ATS-only: its locks
// fall back to SCSI-2 reservations, which Cairn's SVMs do not share. The
// kit reports vStorageSupported unless a test says the probe failed.

// SetVAAIProbeFailed makes host report naa.<wwn> (lower case) as
// vStorageUnsupported from its next rescan on, as after a failed ATS
// probe; failed=false restores it.
func (k *Kit) SetVAAIProbeFailed(host, canonical string, failed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.vaaiFailed == nil {
		k.vaaiFailed = map[string]bool{}
	}
	k.vaaiFailed[host+"/"+canonical] = failed
}

func (k *Kit) vstorage(host, canonical string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.vaaiFailed[host+"/"+canonical] {
		return string(types.ScsiLunVStorageSupportStatusVStorageUnsupported)
	}
	return string(types.ScsiLunVStorageSupportStatusVStorageSupported)
}

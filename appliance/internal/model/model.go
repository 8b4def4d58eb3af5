// Package model owns Cairn's system model: the objects the MDM keeps in etcd
// (protection domains, fault sets, SDSs, devices, storage pools, volumes,
// hosts and mappings, users, placement maps) and their key layout.
//
// Every object is stored as JSON under Prefix+"<kind>/<id>". Names are unique
// per kind through an index key Prefix+"name/<kind>/<name>" -> id, written in
// the same transaction as the object. Layout version: v1 (the prefix); every
// key is listed in keys.go.
package model

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Sizes fixed by the on-disk and placement formats.
const (
	// ChunkSize is the unit of placement and allocation on the SDSs.
	ChunkSize = 1 << 20
	// AllocationUnit: volume sizes are multiples of it (ScaleIO used 8 GiB;
	// 1 GiB keeps small test volumes honest and wastes less).
	AllocationUnit = 1 << 30
	// DefaultPGCount placement groups per pool.
	DefaultPGCount = 256
)

// Kinds, used in keys and in API paths.
const (
	KindPD       = "pd"
	KindFaultSet = "faultset"
	KindSDS      = "sds"
	KindDevice   = "device"
	KindPool     = "pool"
	KindVolume   = "volume"
	KindHost     = "host"
	KindUser     = "user"
)

// Roles of gateway users.
const (
	RoleAdmin    = "admin"    // everything
	RoleOperator = "operator" // volumes, mappings, hosts, maintenance
	RoleMonitor  = "monitor"  // read only
)

// System is the cluster's identity, written once at bootstrap.
type System struct {
	ID      string    `json:"id"` // cluster id, stamped on every device superblock
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

type ProtectionDomain struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// FaultSet groups SDSs that may fail together (a rack, a power phase): no
// two copies of a chunk are placed in one fault set.
type FaultSet struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	PDID string `json:"pd_id"`
}

// SDS states.
const (
	SDSNormal        = "normal"
	SDSMaintenance   = "maintenance" // instant maintenance
	SDSProtectedMain = "protected-maintenance"
	SDSRemoving      = "removing"
)

type SDS struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PDID       string `json:"pd_id"`
	FaultSetID string `json:"fault_set_id,omitempty"` // empty: the SDS is its own fault set
	Address    string `json:"address"`                // data-path host:port
	State      string `json:"state"`
	// RebuildMBps caps the fill traffic (rebuild, resync, rebalance) this
	// SDS sends, in MB/s (10^6 bytes); 0: no cap.
	RebuildMBps int `json:"rebuild_mbps"`
}

// Device states.
const (
	DeviceNormal   = "normal"
	DeviceError    = "error"
	DeviceRemoving = "removing"
)

type Device struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	SDSID    string `json:"sds_id"`
	PoolID   string `json:"pool_id"`
	Path     string `json:"path"`     // stable path: /dev/disk/by-id/..., by-path, or a file
	Capacity int64  `json:"capacity"` // bytes usable for chunks
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
}

type StoragePool struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	PDID         string `json:"pd_id"`
	SparePercent int    `json:"spare_percent"`
	PGCount      int    `json:"pg_count"`
	// ZeroPadding is always true: unwritten or unmapped blocks read as zeros.
	ZeroPadding bool `json:"zero_padding"`
	// RebuildPolicy paces the fills (rebuild, resync, rebalance) of the
	// pool's groups on each SDS: RebuildUnlimited (also when empty),
	// RebuildLimitIO (RebuildMaxIO fill I/Os at once per SDS) or
	// RebuildFavorAppIO. See ops_rebuild.go.
	RebuildPolicy string `json:"rebuild_policy"`
	RebuildMaxIO  int    `json:"rebuild_max_io,omitempty"`
	PoolQoS
}

// Mapping exposes a volume to a host.
type Mapping struct {
	HostID   string `json:"host_id"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// LUN is the SCSI LUN number of the volume, the same for every host
	// and on every SVM (ESXi wants one LUN id per datastore device).
	LUN int `json:"lun"`
	// QoSLimits on this host only; the tighter of these and the
	// volume's effective limits applies (qos.go).
	QoSLimits
}

type Volume struct {
	ID       string    `json:"id"` // 16 hex digits; its value is the wire volume id
	Name     string    `json:"name"`
	PoolID   string    `json:"pool_id"`
	Size     int64     `json:"size"` // bytes, a multiple of AllocationUnit
	Thin     bool      `json:"thin"`
	WWN      string    `json:"wwn"`    // 32 hex digits, NAA type 6
	Serial   string    `json:"serial"` // VPD 0x80
	Mappings []Mapping `json:"mappings,omitempty"`
	Created  time.Time `json:"created"`
	// QoSLimits set on the volume itself (0: none; then the pool's
	// per-GiB rule, if any, applies: EffectiveQoS).
	QoSLimits
}

// Host types.
const (
	HostISCSI = "iscsi"
	HostNBD   = "nbd"
)

type Host struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	IQN  string `json:"iqn,omitempty"` // iSCSI initiator name
	// CHAP credentials for iSCSI (optional). CHAP says a secret is set;
	// the secret itself is stored at CHAPSecretKey(ID), outside the model
	// (keys.go), and never leaves the gateway in API responses. CHAPSecret
	// is filled only where the Store read it (HostCHAPSecret, the ops that
	// set it): a Host from the model or the catalog has it empty.
	CHAPUser   string `json:"chap_user,omitempty"`
	CHAP       bool   `json:"chap,omitempty"`
	CHAPSecret string `json:"-"`
}

// User is a gateway account. Its password hash is stored at
// PasswordHashKey(Name), outside the model (keys.go); PasswordHash is
// filled only where the Store read or made it, and is never encoded.
type User struct {
	Name         string `json:"name"`
	Role         string `json:"role"`
	PasswordHash string `json:"-"`
	// Delegate: the user is a service account that acts for people it
	// authenticated itself (the vCenter plugin for vSphere users) and may
	// name them in the X-Cairn-On-Behalf-Of header, which the gateway then
	// records in its audit events. Any other user sending it is refused.
	Delegate bool `json:"delegate,omitempty"`
}

// Copy states in a placement map. Maps written before CopyReady had a name
// store it as "" (the "state" field left out); CopyRef.UnmarshalJSON reads
// that as CopyReady, and every map is written with the name.
const (
	// CopyReady holds every acknowledged write; may be primary.
	CopyReady = "ready"
	// CopyRebuild receives every new write and is being filled by the
	// primary (a full copy of the group's chunks).
	CopyRebuild = "rebuild"
	// CopyAway is on an SDS in maintenance: it receives nothing; the
	// primary records which chunks change meanwhile.
	CopyAway = "away"
	// CopyResync is back from maintenance: it receives new writes and the
	// primary sends it the chunks that changed while it was away.
	CopyResync = "resync"
)

// CopyRef names one copy of a placement group: a device on an SDS.
type CopyRef struct {
	SDSID    string `json:"sds"`
	DeviceID string `json:"dev"`
	State    string `json:"state,omitempty"`
	// Since is the epoch at which the copy entered its current state.
	Since uint64 `json:"since,omitempty"`
}

// UnmarshalJSON decodes a copy, reading a missing or empty state as
// CopyReady (the layout of maps written before the state had a name).
func (c *CopyRef) UnmarshalJSON(b []byte) error {
	type plain CopyRef // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.State == "" {
		p.State = CopyReady
	}
	*c = CopyRef(p)
	return nil
}

// Active reports whether a copy receives writes.
func (c CopyRef) Active() bool { return c.State != CopyAway }

// PlacementMap gives each placement group of a pool its ordered copy set
// ([0] is the primary). Epoch grows with every change; every data-path
// request carries the epoch it was routed with.
type PlacementMap struct {
	PoolID  string      `json:"pool_id"`
	Epoch   uint64      `json:"epoch"`
	PGCount int         `json:"pg_count"`
	PGs     [][]CopyRef `json:"pgs"`
}

// SVM is an SVM's record (SVMKey), format v1 (the key's prefix): its host
// name, the addresses its daemons connect from (management and data,
// netip text), its roles (contract role names) and its target port. Other
// SVMs admit these addresses to etcd and the SDS port (internal/peersync);
// targets list the ports in REPORT TARGET PORT GROUPS.
type SVM struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	Roles     []string `json:"roles"`
	// TargetPort is the SVM's relative target port (cairn.target.port_id) when
	// it runs the target role: REPORT TARGET PORT GROUPS lists every SVM's.
	TargetPort uint16 `json:"target_port,omitempty"`
}

// SDSLive is written by a running SDS under a lease (LiveKey).
type SDSLive struct {
	Address string    `json:"address"`
	PID     int       `json:"pid"`
	Since   time.Time `json:"since"`
}

// NewID returns a fresh random 16-hex-digit id.
func NewID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[0] &= 0x7f // keep ids positive when read as int64 by other tools
	return hex.EncodeToString(b[:])
}

// IOCounters are cumulative data-path counters (since the SDS started).
type IOCounters struct {
	ReadOps        uint64 `json:"read_ops"`
	WriteOps       uint64 `json:"write_ops"`
	ReadBytes      uint64 `json:"read_bytes"`
	WriteBytes     uint64 `json:"write_bytes"`
	ReadLatencyNs  uint64 `json:"read_latency_ns"`  // sum over ReadOps
	WriteLatencyNs uint64 `json:"write_latency_ns"` // sum over WriteOps
	// Latency histograms (internal/iostats layout v1; trailing empty
	// buckets left out) and the time QoS limits held requests back.
	ReadHist    []uint64 `json:"read_hist,omitempty"`
	WriteHist   []uint64 `json:"write_hist,omitempty"`
	ThrottledNs uint64   `json:"throttled_ns,omitempty"`
}

// DeviceUsage is a device's capacity as its SDS sees it.
type DeviceUsage struct {
	Capacity int64  `json:"capacity"` // bytes for chunks
	Used     int64  `json:"used"`     // bytes in allocated chunks
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
}

// SDSStats is published by each running SDS every few seconds under a lease
// (StatsKey). Volumes holds the I/O this SDS served as primary, by volume id.
type SDSStats struct {
	SDSID string    `json:"sds_id"`
	Time  time.Time `json:"time"`
	// Started identifies the run of the SDS that counts (counters start
	// from zero at each start); DeviceIO is the I/O each device served,
	// mirror writes included.
	Started  time.Time              `json:"started"`
	DeviceIO map[string]IOCounters  `json:"device_io,omitempty"`
	Total    IOCounters             `json:"total"`
	Volumes  map[string]IOCounters  `json:"volumes"`
	Devices  map[string]DeviceUsage `json:"devices"`
	Rebuild  RebuildStats           `json:"rebuild"`
	// VolumeChunks counts the allocated chunks each volume has on this
	// SDS's devices (every copy it holds), by volume id.
	VolumeChunks map[string]int64 `json:"volume_chunks,omitempty"`
}

// RebuildStats is an SDS's share of rebuild, rebalance and resync work (as
// the primary that fills copies).
type RebuildStats struct {
	PendingBytes int64 `json:"pending_bytes"` // still to copy in running fills
	DoneBytes    int64 `json:"done_bytes"`    // copied since start
	ResyncBytes  int64 `json:"resync_bytes"`  // of which delta resync after maintenance
}

// Package gateway is the vcenter-plugin's client of the Cairn gateway REST API
// (/api/v1): the API interface the engines depend on, and its HTTPS
// implementation with a pinned certificate.
//
// The engines only use API, so they can be driven in tests by an in-memory
// implementation (package gatewayfake) and in production by *HTTPClient.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is returned by the Get methods when the gateway answers 404.
// Engines branch on it to create what is missing (idempotent re-runs).
var ErrNotFound = errors.New("not found")

// HealthOK is the System.Health.Status of a whole cluster.
const HealthOK = "ok"

// SDS states as the gateway reports them (model.SDS.State in the appliance).
const (
	SDSNormal               = "normal"
	SDSMaintenance          = "maintenance"
	SDSProtectedMaintenance = "protected-maintenance"
)

// Maintenance modes accepted by EnterSDSMaintenance.
const (
	MaintenanceInstant   = "instant"
	MaintenanceProtected = "protected"
)

// The resource types mirror the JSON the gateway serves (the appliance's
// internal/model types); only the fields the plugin reads are declared.

type ProtectionDomain struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type FaultSet struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	PDID string `json:"protection_domain_id"`
}

type SDS struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PDID       string `json:"protection_domain_id"`
	FaultSetID string `json:"fault_set_id,omitempty"`
	Address    string `json:"address"`
	State      string `json:"state"`
	Up         bool   `json:"up"` // holds its liveness lease
	// Maintenance is the gateway's view of the SDS's maintenance progress
	// (nil from gateways that predate it).
	Maintenance *SDSMaintenanceView `json:"maintenance,omitempty"`
}

// SDSMaintenanceView is the SDS view's "maintenance" object.
type SDSMaintenanceView struct {
	Mode  string `json:"mode"`  // MaintenanceInstant, MaintenanceProtected or ""
	State string `json:"state"` // MaintEntering, MaintIn, MaintResyncing or ""
}

// Maintenance progress states (SDSMaintenanceView.State).
const (
	// MaintEntering: some of the SDS's copies are still served or being
	// filled elsewhere: do not shut it down yet.
	MaintEntering = "entering"
	// MaintIn: nothing depends on the SDS any more: safe to shut down.
	MaintIn = "in-maintenance"
	// MaintResyncing: back from maintenance, copies still resync.
	MaintResyncing = "resyncing"
)

type Device struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	SDSID    string `json:"sds_id"`
	PoolID   string `json:"pool_id"`
	Path     string `json:"path"`
	Capacity int64  `json:"capacity"`
	State    string `json:"state"`
}

type Pool struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	PDID         string `json:"protection_domain_id"`
	SparePercent int    `json:"spare_percent"`
}

type Mapping struct {
	HostID   string `json:"host_id"`
	HostName string `json:"host_name,omitempty"`
	ReadOnly bool   `json:"read_only"`
}

type Volume struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	PoolID   string    `json:"pool_id"`
	Size     int64     `json:"size"`
	Thin     bool      `json:"thin"`
	WWN      string    `json:"wwn"` // 32 hex digits, NAA type 6: ESXi names the LUN "naa."+WWN
	Mappings []Mapping `json:"mappings,omitempty"`
	// QoS: the volume's own limits (0: unlimited) and those it runs with
	// (its own, or the pool's per-GiB rule where it has none).
	IOPSLimit               int64 `json:"iops_limit"`
	BandwidthLimit          int64 `json:"bandwidth_limit"` // bytes per second
	EffectiveIOPSLimit      int64 `json:"effective_iops_limit"`
	EffectiveBandwidthLimit int64 `json:"effective_bandwidth_limit"`
}

// VolumeUpdate is a volume PATCH: nil fields stay, 0 removes a limit; a
// size only grows.
type VolumeUpdate struct {
	Size           *int64 `json:"size,omitempty"` // bytes
	IOPSLimit      *int64 `json:"iops_limit,omitempty"`
	BandwidthLimit *int64 `json:"bandwidth_limit,omitempty"`
}

type Host struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	IQN  string `json:"iqn,omitempty"`
}

// System is GET /api/v1/system (OpenAPI schema SystemInfo).
type System struct {
	Bootstrapped bool `json:"bootstrapped"`
	System       *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"system"`
	Health struct {
		Status   string   `json:"status"` // HealthOK: every SDS up, no device in error, every pool redundant
		SDSs     int      `json:"sds_count"`
		SDSsUp   int      `json:"sds_up_count"`
		SDSsDown []string `json:"sds_down_names"`
		Messages []string `json:"messages"` // what to look at, for humans
	} `json:"health"`
	Capacity struct {
		Raw    int64 `json:"raw"`
		Usable int64 `json:"usable"`
		Used   int64 `json:"allocated"` // usable bytes written
	} `json:"capacity"`
	// Rebuild is the cluster's copy work: rebuild, resync and rebalance
	// (the appliance's rebuildView).
	Rebuild Rebuild `json:"rebuild"`
}

// Job is a gateway job (GET /api/v1/jobs/{id}): a long operation such as
// an SDS drain, kept in etcd so it outlives the gateway that started it.
type Job struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`  // device-add, device-remove, sds-remove, maintenance-enter, ...
	State  string `json:"state"` // JobQueued, JobRunning, JobSucceeded, JobFailed
	Object struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"object"`
	Percent    float64  `json:"percent"`
	ETASeconds *float64 `json:"eta_seconds"`
	Message    string   `json:"message"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Job states.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// Done reports whether the job ended (succeeded or failed).
func (j *Job) Done() bool { return j.State == JobSucceeded || j.State == JobFailed }

// Whole says whether the cluster is whole again after an SDS was away
// (maintenance, a restart): health ok (no copy missing), no placement
// group rebuilding or resyncing, every SDS up and normal; why says what is not,
// for a wait's progress. Health ok alone is "all copies protected", and a
// copy being filled counts as protecting: the gateway refuses the next
// SDS's instant maintenance while a group holding its data is still filled.
func Whole(ctx context.Context, api API) (ok bool, why string, err error) {
	sys, err := api.System(ctx)
	if err != nil {
		return false, "", err
	}
	if sys.Health.Status != HealthOK {
		return false, fmt.Sprintf("cluster health %q (%s)", sys.Health.Status, strings.Join(sys.Health.Messages, "; ")), nil
	}
	if rb := sys.Rebuild; rb.RebuildingGroups > 0 || rb.ResyncingGroups > 0 {
		return false, fmt.Sprintf("%d placement groups rebuilding, %d resyncing", rb.RebuildingGroups, rb.ResyncingGroups), nil
	}
	sdss, err := api.ListSDS(ctx)
	if err != nil {
		return false, "", err
	}
	for _, s := range sdss {
		if s.State != SDSNormal || !s.Up {
			return false, fmt.Sprintf("sds %s is %s (up=%v)", s.Name, s.State, s.Up), nil
		}
	}
	return true, "", nil
}

// Requests (POST bodies).

type SDSSpec struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	PD       string `json:"protection_domain"`
	FaultSet string `json:"fault_set,omitempty"`
}

type DeviceSpec struct {
	SDS   string `json:"sds"`
	Path  string `json:"path"`
	Pool  string `json:"pool"`
	Name  string `json:"name,omitempty"`
	Force bool   `json:"force,omitempty"`
}

type PoolSpec struct {
	Name         string `json:"name"`
	PD           string `json:"protection_domain"`
	SparePercent int    `json:"spare_percent"`
}

type VolumeSpec struct {
	Name string `json:"name"`
	Pool string `json:"pool"`
	Size int64  `json:"size"`
	Thin bool   `json:"thin"`
}

type HostSpec struct {
	Name string `json:"name"`
	Type string `json:"type"`
	IQN  string `json:"iqn,omitempty"`
}

// API is what the deploy, datastore and maintenance engines need from a
// Cairn cluster. Get* take an id or a name and return ErrNotFound (wrapped)
// when the object does not exist. Every call is bounded by ctx.
type API interface {
	// RedeemBootstrapToken sets the admin password of a new system with its
	// one-time bootstrap token (no login needed).
	RedeemBootstrapToken(ctx context.Context, token, password string) error
	System(ctx context.Context) (*System, error)
	// Bootstrap creates the system once; idempotent with the same name.
	Bootstrap(ctx context.Context, name string) error

	GetPD(ctx context.Context, idOrName string) (*ProtectionDomain, error)
	CreatePD(ctx context.Context, name string) (*ProtectionDomain, error)
	GetFaultSet(ctx context.Context, idOrName string) (*FaultSet, error)
	CreateFaultSet(ctx context.Context, name, pd string) (*FaultSet, error)
	GetSDS(ctx context.Context, idOrName string) (*SDS, error)
	ListSDS(ctx context.Context) ([]SDS, error)
	CreateSDS(ctx context.Context, spec SDSSpec) (*SDS, error)
	ListDevices(ctx context.Context) ([]Device, error)
	AddDevice(ctx context.Context, spec DeviceSpec) (*Device, error)
	GetPool(ctx context.Context, idOrName string) (*Pool, error)
	CreatePool(ctx context.Context, spec PoolSpec) (*Pool, error)
	GetVolume(ctx context.Context, idOrName string) (*Volume, error)
	ListVolumes(ctx context.Context) ([]Volume, error)
	CreateVolume(ctx context.Context, spec VolumeSpec) (*Volume, error)
	UpdateVolume(ctx context.Context, idOrName string, up VolumeUpdate) (*Volume, error)
	MapVolume(ctx context.Context, volume, host string) error
	GetHost(ctx context.Context, idOrName string) (*Host, error)
	ListHosts(ctx context.Context) ([]Host, error)
	CreateHost(ctx context.Context, spec HostSpec) (*Host, error)

	EnterSDSMaintenance(ctx context.Context, sds, mode string) error
	ExitSDSMaintenance(ctx context.Context, sds string) error

	// RemoveSDS starts the drain-and-remove of an SDS (POST
	// /sds/{ref}/remove): its copies move to the others, then the leader
	// deletes it with its devices. It answers the gateway job; a removal
	// the gateway refuses (a pool holding volumes would be left on one
	// fault domain, or without room for its data) is a 409 *StatusError
	// and changes nothing. Repeated while the SDS is removing, it answers
	// the running job.
	RemoveSDS(ctx context.Context, sds string) (*Job, error)
	GetJob(ctx context.Context, id string) (*Job, error)
	// DeleteHost removes a host record (DELETE /hosts/{ref}); the gateway
	// refuses one with volumes mapped.
	DeleteHost(ctx context.Context, idOrName string) error
	StatisticsReader // statistics.go
	Upgrades         // upgrade.go
	JoinTokens       // jointokens.go
	// MapVolumeAs maps volume to host with the given access (MapVolume is
	// read-write). Mapping again with the same access changes nothing;
	// with the other access the gateway refuses (409: unmap first).
	MapVolumeAs(ctx context.Context, volume, host string, readOnly bool) error
	// UnmapVolume removes the mapping; unmapping a host that is not
	// mapped changes nothing.
	UnmapVolume(ctx context.Context, volume, host string) error
	// DeleteVolume deletes the volume and its data; the gateway refuses
	// (409 in_use) while the volume is mapped to any host.
	DeleteVolume(ctx context.Context, volume string) error
	// RemoveDevice starts draining a device (POST /devices/{ref}/remove):
	// the gateway moves its copies away and deletes it when nothing
	// references it. It answers the drain job; a repeat while the device
	// is removing answers the running job.
	RemoveDevice(ctx context.Context, idOrName string) (*Job, error)
	// PutSVM records an SVM ahead of its first boot (PUT /svms/{name}), so that
	// the other SVMs' firewalls admit it; a repeat changes nothing.
	PutSVM(ctx context.Context, rec SVMRecord) error
	// DeleteSVM deletes an SVM's record (DELETE /svms/{name}) when the SVM is
	// removed; deleting one that does not exist changes nothing.
	DeleteSVM(ctx context.Context, name string) error
}

// SVMRecord is an SVM's record in the system model (the gateway's SVM schema):
// its host name, management and data addresses, roles and target port.
type SVMRecord struct {
	Name       string   `json:"name"`
	Addresses  []string `json:"addresses"`
	Roles      []string `json:"roles,omitempty"`
	TargetPort int      `json:"target_port,omitempty"`
}

// Device states the plugin reads.
const (
	DeviceNormal   = "normal"
	DeviceRemoving = "removing"
)

// DefaultTimeout bounds one HTTP exchange with the gateway.
const DefaultTimeout = 30 * time.Second

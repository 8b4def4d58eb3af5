package gatewayfake

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// Users, roles and the audit trail, as the gateway keeps them: the Array's
// own methods act as the admin (engine tests that need no login); Connect
// logs in as a user and returns a Session that refuses what the user's role
// does not allow, as the gateway's route table does (reads: monitor;
// volumes, hosts, mappings, SDS maintenance: operator; the rest and users:
// admin), and that records every change it is asked for, refused ones too,
// under the user and the person it acts for. A user may name that person
// (Config.OnBehalfOf) only if it is a delegate.

type fakeUser struct {
	role, password string
	delegate       bool
}

// AuditEvent is one audited call: the user, the person it acted for, the
// call ("CreateVolume v1") and the status the gateway would answer.
type AuditEvent struct {
	User, OnBehalfOf, Call string
	Status                 int
}

var roleRank = map[string]int{gateway.RoleMonitor: 1, gateway.RoleOperator: 2, gateway.RoleAdmin: 3}

// Audit returns the audited calls, in order.
func (a *Array) Audit() []AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]AuditEvent(nil), a.audit...)
}

func (a *Array) userLocked(name string) (fakeUser, bool) {
	if name == "admin" && a.AdminPassword != "" {
		return fakeUser{role: gateway.RoleAdmin, password: a.AdminPassword}, true
	}
	u, ok := a.users[name]
	return u, ok
}

func (a *Array) GetUser(ctx context.Context, name string) (*gateway.User, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.userLocked(name)
	if !ok {
		return nil, notFound("user", name)
	}
	return &gateway.User{Name: name, Role: u.role, Delegate: u.delegate}, nil
}

func (a *Array) CreateUser(ctx context.Context, spec gateway.UserSpec) (*gateway.User, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.userLocked(spec.Name); ok {
		return nil, &gateway.StatusError{Method: "POST", Path: "/api/v1/users", Status: http.StatusConflict, Message: conflict("user", spec.Name).Error()}
	}
	if roleRank[spec.Role] == 0 || len(spec.Password) < 8 {
		return nil, &gateway.StatusError{Method: "POST", Path: "/api/v1/users", Status: http.StatusBadRequest, Message: "user: a role of admin, operator or monitor and a password of 8 or more bytes"}
	}
	if err := a.call("CreateUser", spec.Name); err != nil {
		return nil, err
	}
	if a.users == nil {
		a.users = map[string]fakeUser{}
	}
	a.users[spec.Name] = fakeUser{role: spec.Role, password: spec.Password, delegate: spec.Delegate}
	return &gateway.User{Name: spec.Name, Role: spec.Role, Delegate: spec.Delegate}, nil
}

func (a *Array) UpdateUser(ctx context.Context, name string, up gateway.UserUpdate) (*gateway.User, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.users[name]
	if !ok {
		return nil, notFound("user", name)
	}
	if err := a.call("UpdateUser", name); err != nil {
		return nil, err
	}
	if up.Role != "" {
		u.role = up.Role
	}
	if up.Password != "" {
		u.password = up.Password
	}
	if up.Delegate != nil {
		u.delegate = *up.Delegate
	}
	a.users[name] = u
	return &gateway.User{Name: name, Role: u.role, Delegate: u.delegate}, nil
}

// Users lists the user names (the admin included once its password is set).
func (a *Array) Users() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for n := range a.users {
		out = append(out, n)
	}
	if a.AdminPassword != "" {
		out = append(out, "admin")
	}
	sort.Strings(out)
	return out
}

// Connect is a deploy.GatewayFactory: like the HTTP client it does not log
// in at once; each call of the Session checks cfg's user and password
// (the gateway's 401) and that only a delegate names a person (403).
func (a *Array) Connect(cfg gateway.Config) (gateway.API, error) {
	return &Session{Array: a, user: cfg.Username, password: cfg.Password, onBehalfOf: cfg.OnBehalfOf}, nil
}

// Session is the Array as one logged-in user sees it. Reads need only a
// login (every role may read), as on the gateway; users are admin only.
type Session struct {
	*Array
	user, password, onBehalfOf string
}

// allow checks the login and the user's role (read at each call: a role
// change takes effect at once, as on the gateway) and audits mutating
// calls, refused ones too.
func (s *Session) allow(need, method, path, call string, mutating bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.userLocked(s.user)
	status := http.StatusOK
	var err error
	fail := func(st int, msg string, args ...any) {
		status, err = st, &gateway.StatusError{Method: method, Path: path, Status: st, Message: fmt.Sprintf(msg, args...)}
	}
	switch {
	case !ok || u.password != s.password:
		fail(http.StatusUnauthorized, "log in to the gateway as %s: wrong user name or password", s.user)
		return err // not logged in: nothing to audit
	case s.onBehalfOf != "" && !u.delegate:
		fail(http.StatusForbidden, "user %q may not act on behalf of others (%s)", s.user, gateway.OnBehalfOfHeader)
	case roleRank[u.role] < roleRank[need]:
		want := need
		if need != gateway.RoleAdmin {
			want += " or admin"
		}
		fail(http.StatusForbidden, "user %q has role %s; %s %s needs role %s: ask an admin", s.user, u.role, method, path, want)
	}
	if mutating {
		obo := s.onBehalfOf
		if !u.delegate {
			obo = ""
		}
		s.audit = append(s.audit, AuditEvent{User: s.user, OnBehalfOf: obo, Call: call, Status: status})
	}
	return err
}

func (s *Session) read(path string) error {
	return s.allow(gateway.RoleMonitor, "GET", path, "", false)
}

func (s *Session) System(ctx context.Context) (*gateway.System, error) {
	if err := s.read("/api/v1/system"); err != nil {
		return nil, err
	}
	return s.Array.System(ctx)
}
func (s *Session) GetPD(ctx context.Context, key string) (*gateway.ProtectionDomain, error) {
	if err := s.read("/api/v1/protection-domains/" + key); err != nil {
		return nil, err
	}
	return s.Array.GetPD(ctx, key)
}
func (s *Session) GetFaultSet(ctx context.Context, key string) (*gateway.FaultSet, error) {
	if err := s.read("/api/v1/fault-sets/" + key); err != nil {
		return nil, err
	}
	return s.Array.GetFaultSet(ctx, key)
}
func (s *Session) GetSDS(ctx context.Context, key string) (*gateway.SDS, error) {
	if err := s.read("/api/v1/sds/" + key); err != nil {
		return nil, err
	}
	return s.Array.GetSDS(ctx, key)
}
func (s *Session) ListSDS(ctx context.Context) ([]gateway.SDS, error) {
	if err := s.read("/api/v1/sds"); err != nil {
		return nil, err
	}
	return s.Array.ListSDS(ctx)
}
func (s *Session) ListDevices(ctx context.Context) ([]gateway.Device, error) {
	if err := s.read("/api/v1/devices"); err != nil {
		return nil, err
	}
	return s.Array.ListDevices(ctx)
}
func (s *Session) GetPool(ctx context.Context, key string) (*gateway.Pool, error) {
	if err := s.read("/api/v1/pools/" + key); err != nil {
		return nil, err
	}
	return s.Array.GetPool(ctx, key)
}
func (s *Session) GetVolume(ctx context.Context, key string) (*gateway.Volume, error) {
	if err := s.read("/api/v1/volumes/" + key); err != nil {
		return nil, err
	}
	return s.Array.GetVolume(ctx, key)
}
func (s *Session) ListVolumes(ctx context.Context) ([]gateway.Volume, error) {
	if err := s.read("/api/v1/volumes"); err != nil {
		return nil, err
	}
	return s.Array.ListVolumes(ctx)
}
func (s *Session) GetHost(ctx context.Context, key string) (*gateway.Host, error) {
	if err := s.read("/api/v1/hosts/" + key); err != nil {
		return nil, err
	}
	return s.Array.GetHost(ctx, key)
}
func (s *Session) ListHosts(ctx context.Context) ([]gateway.Host, error) {
	if err := s.read("/api/v1/hosts"); err != nil {
		return nil, err
	}
	return s.Array.ListHosts(ctx)
}

func (s *Session) GetUser(ctx context.Context, name string) (*gateway.User, error) {
	if err := s.allow(gateway.RoleAdmin, "GET", "/api/v1/users/"+name, "GetUser "+name, false); err != nil {
		return nil, err
	}
	return s.Array.GetUser(ctx, name)
}
func (s *Session) CreateUser(ctx context.Context, spec gateway.UserSpec) (*gateway.User, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/users", "CreateUser "+spec.Name, true); err != nil {
		return nil, err
	}
	return s.Array.CreateUser(ctx, spec)
}
func (s *Session) UpdateUser(ctx context.Context, name string, up gateway.UserUpdate) (*gateway.User, error) {
	if err := s.allow(gateway.RoleAdmin, "PATCH", "/api/v1/users/"+name, "UpdateUser "+name, true); err != nil {
		return nil, err
	}
	return s.Array.UpdateUser(ctx, name, up)
}
func (s *Session) Bootstrap(ctx context.Context, name string) error {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/system/bootstrap", "Bootstrap "+name, true); err != nil {
		return err
	}
	return s.Array.Bootstrap(ctx, name)
}
func (s *Session) CreatePD(ctx context.Context, name string) (*gateway.ProtectionDomain, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/protection-domains", "CreatePD "+name, true); err != nil {
		return nil, err
	}
	return s.Array.CreatePD(ctx, name)
}
func (s *Session) CreateFaultSet(ctx context.Context, name, pd string) (*gateway.FaultSet, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/fault-sets", "CreateFaultSet "+name, true); err != nil {
		return nil, err
	}
	return s.Array.CreateFaultSet(ctx, name, pd)
}
func (s *Session) CreateSDS(ctx context.Context, spec gateway.SDSSpec) (*gateway.SDS, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/sds", "CreateSDS "+spec.Name, true); err != nil {
		return nil, err
	}
	return s.Array.CreateSDS(ctx, spec)
}
func (s *Session) AddDevice(ctx context.Context, spec gateway.DeviceSpec) (*gateway.Device, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/devices", "AddDevice "+spec.SDS+":"+spec.Path, true); err != nil {
		return nil, err
	}
	return s.Array.AddDevice(ctx, spec)
}
func (s *Session) CreatePool(ctx context.Context, spec gateway.PoolSpec) (*gateway.Pool, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/pools", "CreatePool "+spec.Name, true); err != nil {
		return nil, err
	}
	return s.Array.CreatePool(ctx, spec)
}
func (s *Session) CreateVolume(ctx context.Context, spec gateway.VolumeSpec) (*gateway.Volume, error) {
	if err := s.allow(gateway.RoleOperator, "POST", "/api/v1/volumes", "CreateVolume "+spec.Name, true); err != nil {
		return nil, err
	}
	return s.Array.CreateVolume(ctx, spec)
}
func (s *Session) UpdateVolume(ctx context.Context, key string, up gateway.VolumeUpdate) (*gateway.Volume, error) {
	if err := s.allow(gateway.RoleOperator, "PATCH", "/api/v1/volumes/"+key, "UpdateVolume "+key, true); err != nil {
		return nil, err
	}
	return s.Array.UpdateVolume(ctx, key, up)
}
func (s *Session) MapVolume(ctx context.Context, volume, host string) error {
	if err := s.allow(gateway.RoleOperator, "POST", "/api/v1/volumes/"+volume+"/map", "MapVolume "+volume+" "+host, true); err != nil {
		return err
	}
	return s.Array.MapVolume(ctx, volume, host)
}
func (s *Session) CreateHost(ctx context.Context, spec gateway.HostSpec) (*gateway.Host, error) {
	if err := s.allow(gateway.RoleOperator, "POST", "/api/v1/hosts", "CreateHost "+spec.Name, true); err != nil {
		return nil, err
	}
	return s.Array.CreateHost(ctx, spec)
}
func (s *Session) EnterSDSMaintenance(ctx context.Context, sds, mode string) error {
	if err := s.allow(gateway.RoleOperator, "POST", "/api/v1/sds/"+sds+"/maintenance", "EnterSDSMaintenance "+sds, true); err != nil {
		return err
	}
	return s.Array.EnterSDSMaintenance(ctx, sds, mode)
}
func (s *Session) ExitSDSMaintenance(ctx context.Context, sds string) error {
	if err := s.allow(gateway.RoleOperator, "DELETE", "/api/v1/sds/"+sds+"/maintenance", "ExitSDSMaintenance "+sds, true); err != nil {
		return err
	}
	return s.Array.ExitSDSMaintenance(ctx, sds)
}

var (
	_ gateway.API   = (*Session)(nil)
	_ gateway.Users = (*Session)(nil)
	_ gateway.Users = (*Array)(nil)
)

// The calls added with volume map/unmap/delete, host removal and the
// dashboards: the same roles as on the gateway (docs/api.md).
func (s *Session) MapVolumeAs(ctx context.Context, volume, host string, readOnly bool) error {
	if err := s.allow(gateway.RoleOperator, "POST", "/api/v1/volumes/"+volume+"/map", "MapVolume "+volume+" "+host, true); err != nil {
		return err
	}
	return s.Array.MapVolumeAs(ctx, volume, host, readOnly)
}
func (s *Session) UnmapVolume(ctx context.Context, volume, host string) error {
	if err := s.allow(gateway.RoleOperator, "POST", "/api/v1/volumes/"+volume+"/unmap", "UnmapVolume "+volume+" "+host, true); err != nil {
		return err
	}
	return s.Array.UnmapVolume(ctx, volume, host)
}
func (s *Session) DeleteVolume(ctx context.Context, volume string) error {
	if err := s.allow(gateway.RoleOperator, "DELETE", "/api/v1/volumes/"+volume, "DeleteVolume "+volume, true); err != nil {
		return err
	}
	return s.Array.DeleteVolume(ctx, volume)
}
func (s *Session) RemoveSDS(ctx context.Context, sds string) (*gateway.Job, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/sds/"+sds+"/remove", "RemoveSDS "+sds, true); err != nil {
		return nil, err
	}
	return s.Array.RemoveSDS(ctx, sds)
}
func (s *Session) PutSVM(ctx context.Context, rec gateway.SVMRecord) error {
	if err := s.allow(gateway.RoleAdmin, "PUT", "/api/v1/svms/"+rec.Name, "PutSVM "+rec.Name, true); err != nil {
		return err
	}
	return s.Array.PutSVM(ctx, rec)
}
func (s *Session) DeleteSVM(ctx context.Context, name string) error {
	if err := s.allow(gateway.RoleAdmin, "DELETE", "/api/v1/svms/"+name, "DeleteSVM "+name, true); err != nil {
		return err
	}
	return s.Array.DeleteSVM(ctx, name)
}
func (s *Session) DeleteHost(ctx context.Context, key string) error {
	if err := s.allow(gateway.RoleOperator, "DELETE", "/api/v1/hosts/"+key, "DeleteHost "+key, true); err != nil {
		return err
	}
	return s.Array.DeleteHost(ctx, key)
}
func (s *Session) GetJob(ctx context.Context, id string) (*gateway.Job, error) {
	if err := s.read("/api/v1/jobs/" + id); err != nil {
		return nil, err
	}
	return s.Array.GetJob(ctx, id)
}
func (s *Session) Statistics(ctx context.Context, kind, ref string) (*gateway.Statistics, error) {
	if err := s.read("/api/v1/statistics"); err != nil {
		return nil, err
	}
	return s.Array.Statistics(ctx, kind, ref)
}
func (s *Session) Rebuild(ctx context.Context) (*gateway.Rebuild, error) {
	if err := s.read("/api/v1/system"); err != nil {
		return nil, err
	}
	return s.Array.Rebuild(ctx)
}
func (s *Session) RemoveDevice(ctx context.Context, key string) (*gateway.Job, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/devices/"+key+"/remove", "RemoveDevice "+key, true); err != nil {
		return nil, err
	}
	return s.Array.RemoveDevice(ctx, key)
}

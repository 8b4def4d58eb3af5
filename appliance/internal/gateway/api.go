package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// APIPrefix is the root of the REST API.
const APIPrefix = "/api/v1"

// route is one endpoint. role is the least role allowed (admin > operator >
// monitor); "" means no login is needed. kind is the kind of the {ref} in
// the path (If-Match applies to it), "" for none. The route table is the
// single source of what is served; a test checks it against openapi.json.
type route struct {
	method string
	path   string // ServeMux pattern path, e.g. /api/v1/volumes/{ref}
	role   string
	kind   string
	h      func(*call) (status int, body any, err error)
}

// call is one request being served.
type call struct {
	srv        *Server
	ctx        context.Context
	w          http.ResponseWriter
	r          *http.Request
	user       model.User // zero for routes without login
	lease      clientv3.LeaseID
	sessionKey string
	auditUser  string
	// object is what the request acted on, for the audit event.
	object *objectRef
}

func (c *call) decode(v any) error {
	if err := decodeJSON(c.r.Body, v); err != nil {
		return model.WithField(errorf(http.StatusBadRequest, "%v", err), model.FieldOf(err))
	}
	return nil
}

// decodeOptional decodes a body that may be empty (actions without
// parameters, e.g. POST /sds/{ref}/remove).
func (c *call) decodeOptional(v any) error {
	b, err := io.ReadAll(io.LimitReader(c.r.Body, maxBody+1))
	if err != nil {
		return errorf(http.StatusBadRequest, "read request body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	c.r.Body = io.NopCloser(bytes.NewReader(b))
	return c.decode(v)
}

func (c *call) ref() string { return c.r.PathValue("ref") }

// rawBody is written as is (metrics, the OpenAPI document).
type rawBody struct {
	contentType string
	data        []byte
}

// streamed marks a response the handler wrote itself (the SSE stream).
type streamed struct{}

func (s *Server) apiRoutes() []route {
	const A, O, M = model.RoleAdmin, model.RoleOperator, model.RoleMonitor
	p := func(s string) string { return APIPrefix + s }
	rs := []route{
		{"POST", p("/login"), "", "", s.login},
		{"POST", p("/bootstrap/admin-password"), "", "", s.redeemBootstrapToken},
		{"POST", p("/logout"), M, "", s.logout},
		{"GET", p("/openapi.json"), "", "", s.openapi},
		{"GET", p("/system"), M, "", s.getSystem},
		{"POST", p("/system/bootstrap"), A, "", s.bootstrap},
		{"GET", "/metrics", "", "", s.metrics},
	}
	for _, k := range s.kinds() {
		rs = append(rs,
			route{"GET", p(k.path), k.read, "", k.listHandler(s)},
			route{"POST", p(k.path), k.write, "", k.createHandler(s)},
			route{"GET", p(k.path + "/{ref}"), k.read, k.kind, k.getHandler(s)},
			route{"PATCH", p(k.path + "/{ref}"), k.write, k.kind, k.updateHandler(s)},
			route{"DELETE", p(k.path + "/{ref}"), k.write, k.kind, k.deleteHandler(s)},
		)
	}
	rs = append(rs,
		route{"POST", p("/volumes/{ref}/map"), O, model.KindVolume, s.mapVolume},
		route{"POST", p("/volumes/{ref}/unmap"), O, model.KindVolume, s.unmapVolume},
		route{"POST", p("/sds/{ref}/maintenance"), O, model.KindSDS, s.enterSDSMaintenance},
		route{"DELETE", p("/sds/{ref}/maintenance"), O, model.KindSDS, s.exitSDSMaintenance},
		route{"POST", p("/sds/{ref}/remove"), A, model.KindSDS, s.removeSDS},
		route{"POST", p("/devices/{ref}/remove"), A, model.KindDevice, s.removeDevice},
		route{"POST", p("/fault-sets/{ref}/maintenance"), O, model.KindFaultSet, s.enterFaultSetMaintenance},
		route{"DELETE", p("/fault-sets/{ref}/maintenance"), O, model.KindFaultSet, s.exitFaultSetMaintenance},
		route{"GET", p("/jobs"), O, "", s.listJobs},
		route{"GET", p("/jobs/{id}"), O, "", s.getJob},
		route{"GET", p("/events"), M, "", s.listEvents},
		route{"GET", p("/events/stream"), M, "", s.streamEvents},
		route{"GET", p("/alerts"), M, "", s.listAlerts},
		route{"GET", p("/mdm/members"), M, "", s.listMDMMembers},
		route{"POST", p("/mdm/members"), A, "", s.addMDMMember},
		route{"DELETE", p("/mdm/members/{name}"), A, "", s.removeMDMMember},
		route{"POST", p("/mdm/leader"), A, "", s.moveMDMLeader},
		route{"GET", p("/statistics"), M, "", s.getSystemStatistics},
		route{"GET", p("/statistics/{kind}/{ref}"), M, "", s.getObjectStatistics},
	)
	return rs
}

func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range s.routes {
		mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	// Method-less patterns are less specific than "METHOD path": they catch
	// the other methods and answer 405 in the API's error format.
	for path, methods := range allowed {
		sort.Strings(methods)
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, CodeInvalid, fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no endpoint %s %s; the API is described at %s/openapi.json", r.Method, r.URL.Path, APIPrefix))
	})
	return mux
}

// wrap authenticates, authorises, runs the handler, writes the response and
// the audit event of a mutating request (refused ones included).
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{srv: s, ctx: r.Context(), w: w, r: r}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody+1)
		status, body, err := s.serve(c, rt)
		if err != nil {
			var code string
			status, code = classify(err)
			msg := err.Error()
			if status == http.StatusInternalServerError {
				s.log.Error("gateway request failed", "method", r.Method, "path", r.URL.Path, "err", err)
				msg = "internal error: " + msg + "; the gateway log has details"
			}
			body = errorBody{Code: code, Message: msg, Field: model.FieldOf(err)}
		}
		switch b := body.(type) {
		case nil:
			w.WriteHeader(status)
		case streamed:
		case rawBody:
			w.Header().Set("Content-Type", b.contentType)
			w.WriteHeader(status)
			w.Write(b.data)
		default:
			writeJSON(w, status, body)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			user := c.user.Name
			if user == "" {
				user = c.auditUser
			}
			s.log.Info("audit", "user", user, "method", r.Method, "path", r.URL.Path, "status", status, "remote", r.RemoteAddr)
			s.audit(r.Context(), c, user, status, body)
		}
	})
}

func (s *Server) serve(c *call, rt route) (status int, body any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("gateway handler panic", "method", c.r.Method, "path", c.r.URL.Path, "panic", p)
			status, body, err = 0, nil, fmt.Errorf("handler panic: %v", p)
		}
	}()
	if rt.role != "" {
		u, lease, key, err := s.authenticate(c.ctx, c.r)
		if err != nil {
			return 0, nil, err
		}
		c.user, c.lease, c.sessionKey = u, lease, key
		if roleRank[u.Role] < roleRank[rt.role] {
			need := rt.role
			if need != model.RoleAdmin {
				need += " or admin"
			}
			return 0, nil, errorf(http.StatusForbidden, "user %q has role %s; %s %s needs role %s: ask an admin", u.Name, u.Role, c.r.Method, c.r.URL.Path, need)
		}
	}
	if rt.kind != "" && c.r.Method != http.MethodGet {
		if err := s.checkIfMatch(c, rt.kind); err != nil {
			return 0, nil, err
		}
	}
	return rt.h(c)
}

// checkIfMatch compares an If-Match header with the object's current
// version, and makes the model operation re-check it atomically (a change
// between this check and the write still fails with 412).
func (s *Server) checkIfMatch(c *call, kind string) error {
	rev, err := parseIfMatch(c.r.Header.Get("If-Match"))
	if err != nil || rev == 0 {
		return err
	}
	id, err := s.store.Resolve(c.ctx, kind, c.ref())
	if err != nil {
		return model.WithField(err, "ref")
	}
	r, err := s.cfg.Etcd.Get(c.ctx, model.Key(kind, id))
	if err != nil {
		return fmt.Errorf("read %s: %v: %w", id, err, model.ErrUnavailable)
	}
	if len(r.Kvs) == 0 {
		return model.WithField(errorf(http.StatusNotFound, "%s %q not found", kind, c.ref()), "ref")
	}
	if cur := r.Kvs[0].ModRevision; cur != rev {
		return &apiError{status: http.StatusPreconditionFailed, code: CodeConflict,
			msg: fmt.Sprintf("%s %q changed since ETag \"%d\" (now \"%d\"); read it again (GET) and retry with the new ETag", kind, c.ref(), rev, cur)}
	}
	c.ctx = model.ExpectRevision(c.ctx, kind, id, rev)
	return nil
}

// parseIfMatch reads an If-Match header: 0 for none or "*", else the
// revision its ETag names.
func parseIfMatch(h string) (int64, error) {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return 0, nil
	}
	rev, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), 10, 64)
	if err != nil || rev <= 0 || len(h) > 40 {
		return 0, model.WithField(errorf(http.StatusBadRequest, "If-Match %q is not an ETag of this API (a quoted number, from the ETag header of GET)", h), "If-Match")
	}
	return rev, nil
}

// filter is one ?param= of a list route: values returns the strings an
// object matches (its id and name for a reference); ref is the kind a
// reference filter names (checked to exist), "" for plain values.
type filter struct {
	param  string
	ref    string
	values func(w *world, id string) []string
}

// kindAPI serves list/get/create/update/delete of one kind of object.
type kindAPI struct {
	kind        string
	path        string // under APIPrefix, e.g. /volumes
	read, write string // least roles
	// ids returns the ids of all objects, sorted by name.
	ids func(w *world) []string
	// view returns the view of one object by id.
	view    func(w *world, id string) (any, bool)
	filters []filter
	// create returns the new object's id, or an existing identical one's
	// with created false (an idempotent repeat).
	create func(c *call) (id string, created bool, err error)
	update func(c *call) (id string, err error)
	del    func(ctx context.Context, ref string) error
}

// nameFilter, refFilter and stateFilter build the common filters.
func nameFilter(name func(w *world, id string) string) filter {
	return filter{param: "name", values: func(w *world, id string) []string { return []string{name(w, id)} }}
}

func refFilter(param, kind string, refs func(w *world, id string) []string) filter {
	return filter{param: param, ref: kind, values: refs}
}

func (s *Server) kinds() []kindAPI {
	const A, O, M = model.RoleAdmin, model.RoleOperator, model.RoleMonitor
	st := s.store
	pdOf := func(w *world, pdID string) []string { return []string{pdID, w.pds[pdID].Name} }
	return []kindAPI{
		{kind: model.KindPD, path: "/protection-domains", read: M, write: A,
			ids: func(w *world) []string {
				return idsByName(w.pds, func(v model.ProtectionDomain) string { return v.Name })
			},
			view:    func(w *world, id string) (any, bool) { v, ok := w.pds[id]; return w.pdView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.pds[id].Name })},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.PDSpec) (model.ProtectionDomain, error) { return st.CreatePD(c.ctx, spec) },
					func(v model.ProtectionDomain) string { return v.ID },
					func(w *world, spec model.PDSpec) string { return w.byName(model.KindPD, spec.Name) })
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.NameUpdate) (model.ProtectionDomain, error) { return st.UpdatePD(c.ctx, c.ref(), up) },
					func(v model.ProtectionDomain) string { return v.ID })
			},
			del: st.DeletePD},
		{kind: model.KindFaultSet, path: "/fault-sets", read: M, write: A,
			ids: func(w *world) []string {
				return idsByName(w.faultSets, func(v model.FaultSet) string { return v.Name })
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.faultSets[id]; return w.faultSetView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.faultSets[id].Name }),
				refFilter("protection_domain", model.KindPD, func(w *world, id string) []string { return pdOf(w, w.faultSets[id].PDID) })},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.FaultSetSpec) (model.FaultSet, error) { return st.CreateFaultSet(c.ctx, spec) },
					func(v model.FaultSet) string { return v.ID },
					func(w *world, spec model.FaultSetSpec) string {
						id := w.byName(model.KindFaultSet, spec.Name)
						if w.faultSets[id].PDID != w.resolve(model.KindPD, spec.PD) {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.NameUpdate) (model.FaultSet, error) { return st.UpdateFaultSet(c.ctx, c.ref(), up) },
					func(v model.FaultSet) string { return v.ID })
			},
			del: st.DeleteFaultSet},
		{kind: model.KindSDS, path: "/sds", read: M, write: A,
			ids:  func(w *world) []string { return idsByName(w.sdss, func(v model.SDS) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.sdss[id]; return w.sdsView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.sdss[id].Name }),
				refFilter("protection_domain", model.KindPD, func(w *world, id string) []string { return pdOf(w, w.sdss[id].PDID) }),
				refFilter("fault_set", model.KindFaultSet, func(w *world, id string) []string {
					f := w.sdss[id].FaultSetID
					return []string{f, w.faultSets[f].Name}
				}),
				{param: "state", values: func(w *world, id string) []string { return []string{w.sdss[id].State} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.SDSSpec) (model.SDS, error) { return st.CreateSDS(c.ctx, spec) },
					func(v model.SDS) string { return v.ID },
					func(w *world, spec model.SDSSpec) string {
						id := w.byName(model.KindSDS, spec.Name)
						x := w.sdss[id]
						if x.PDID != w.resolve(model.KindPD, spec.PD) || x.Address != spec.Address ||
							(spec.FaultSet != "" && x.FaultSetID != w.resolve(model.KindFaultSet, spec.FaultSet)) || (spec.FaultSet == "" && x.FaultSetID != "") {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.SDSUpdate) (model.SDS, error) { return st.UpdateSDS(c.ctx, c.ref(), up) },
					func(v model.SDS) string { return v.ID })
			},
			del: st.DeleteSDS},
		{kind: model.KindDevice, path: "/devices", read: M, write: A,
			ids:  func(w *world) []string { return idsByName(w.devices, func(v model.Device) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.devices[id]; return w.deviceView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.devices[id].Name }),
				refFilter("sds", model.KindSDS, func(w *world, id string) []string {
					x := w.devices[id].SDSID
					return []string{x, w.sdss[x].Name}
				}),
				refFilter("pool", model.KindPool, func(w *world, id string) []string {
					p := w.devices[id].PoolID
					return []string{p, w.pools[p].Name}
				}),
				{param: "state", values: func(w *world, id string) []string { return []string{w.devices[id].State} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.DeviceSpec) (model.Device, error) {
					return st.AddDevice(c.ctx, spec, s.prepareFunc())
				}, func(v model.Device) string { return v.ID },
					func(w *world, spec model.DeviceSpec) string {
						x, p := w.resolve(model.KindSDS, spec.SDS), w.resolve(model.KindPool, spec.Pool)
						for _, d := range w.devices {
							if d.SDSID == x && d.Path == spec.Path && d.PoolID == p && (spec.Name == "" || spec.Name == d.Name) {
								return d.ID
							}
						}
						return ""
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.NameUpdate) (model.Device, error) { return st.UpdateDevice(c.ctx, c.ref(), up) },
					func(v model.Device) string { return v.ID })
			},
			del: st.DeleteDevice},
		{kind: model.KindPool, path: "/pools", read: M, write: A,
			ids:  func(w *world) []string { return idsByName(w.pools, func(v model.StoragePool) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.pools[id]; return w.poolView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.pools[id].Name }),
				refFilter("protection_domain", model.KindPD, func(w *world, id string) []string { return pdOf(w, w.pools[id].PDID) })},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.PoolSpec) (model.StoragePool, error) { return st.CreatePool(c.ctx, spec) },
					func(v model.StoragePool) string { return v.ID },
					func(w *world, spec model.PoolSpec) string {
						id := w.byName(model.KindPool, spec.Name)
						p := w.pools[id]
						if p.PDID != w.resolve(model.KindPD, spec.PD) || (spec.SparePercent != nil && *spec.SparePercent != p.SparePercent) ||
							(spec.PGCount != 0 && spec.PGCount != p.PGCount) {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.PoolUpdate) (model.StoragePool, error) { return st.UpdatePool(c.ctx, c.ref(), up) },
					func(v model.StoragePool) string { return v.ID })
			},
			del: st.DeletePool},
		{kind: model.KindVolume, path: "/volumes", read: M, write: O,
			ids:  func(w *world) []string { return idsByName(w.volumes, func(v model.Volume) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.volumes[id]; return w.volumeView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.volumes[id].Name }),
				refFilter("pool", model.KindPool, func(w *world, id string) []string {
					p := w.volumes[id].PoolID
					return []string{p, w.pools[p].Name}
				}),
				refFilter("host", model.KindHost, func(w *world, id string) []string {
					var out []string
					for _, m := range w.volumes[id].Mappings {
						out = append(out, m.HostID, w.hosts[m.HostID].Name)
					}
					return out
				})},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.VolumeSpec) (model.Volume, error) { return st.CreateVolume(c.ctx, spec) },
					func(v model.Volume) string { return v.ID },
					func(w *world, spec model.VolumeSpec) string {
						id := w.byName(model.KindVolume, spec.Name)
						v := w.volumes[id]
						thin := spec.Thin == nil || *spec.Thin
						if v.PoolID != w.resolve(model.KindPool, spec.Pool) || v.Size != spec.Size || v.Thin != thin {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.VolumeUpdate) (model.Volume, error) { return st.UpdateVolume(c.ctx, c.ref(), up) },
					func(v model.Volume) string { return v.ID })
			},
			del: st.DeleteVolume},
		{kind: model.KindHost, path: "/hosts", read: M, write: O,
			ids:  func(w *world) []string { return idsByName(w.hosts, func(v model.Host) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.hosts[id]; return w.hostView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.hosts[id].Name }),
				{param: "type", values: func(w *world, id string) []string { return []string{w.hosts[id].Type} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.HostSpec) (model.Host, error) { return st.CreateHost(c.ctx, spec) },
					func(v model.Host) string { return v.ID },
					func(w *world, spec model.HostSpec) string {
						id := w.byName(model.KindHost, spec.Name)
						h := w.hosts[id]
						iqn := spec.IQN
						if n, err := model.NormalizeIQN(spec.IQN); err == nil {
							iqn = n
						}
						if h.Type != spec.Type || h.IQN != iqn || h.CHAPUser != spec.CHAPUser || h.CHAPSecret != spec.CHAPSecret {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.HostUpdate) (model.Host, error) { return st.UpdateHost(c.ctx, c.ref(), up) },
					func(v model.Host) string { return v.ID })
			},
			del: st.DeleteHost},
		// Users are admin-only, reads included: the list of accounts and
		// their roles is security-relevant. A repeated create is always
		// already_exists: the password cannot be compared.
		{kind: model.KindUser, path: "/users", read: A, write: A,
			ids:  func(w *world) []string { return idsByName(w.users, func(v model.User) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.users[id]; return userViewOf(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return id }),
				{param: "role", values: func(w *world, id string) []string { return []string{w.users[id].Role} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.UserSpec) (model.User, error) { return st.CreateUser(c.ctx, spec) },
					func(v model.User) string { return v.Name }, nil)
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.UserUpdate) (model.User, error) { return st.UpdateUser(c.ctx, c.ref(), up) },
					func(v model.User) string { return v.Name })
			},
			del: st.DeleteUser},
	}
}

// idsByName returns the keys of m ordered by the objects' names.
func idsByName[T any](m map[string]T, name func(T) string) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := name(m[out[i]]), name(m[out[j]])
		return a < b || (a == b && out[i] < out[j])
	})
	return out
}

// createWith decodes the request into Spec and runs create. When create
// finds the name taken, same (if given) looks for an existing object equal
// to the spec: then the request is a repeat and answers that object.
func createWith[Spec, T any](c *call, create func(Spec) (T, error), id func(T) string, same func(*world, Spec) string) (string, bool, error) {
	var spec Spec
	if err := c.decode(&spec); err != nil {
		return "", false, err
	}
	v, err := create(spec)
	if err != nil {
		if errors.Is(err, model.ErrExists) && same != nil {
			if w, werr := c.world(); werr == nil {
				if got := same(w, spec); got != "" {
					return got, false, nil
				}
			}
		}
		return "", false, err
	}
	return id(v), true, nil
}

// updateWith decodes the request into Update and runs update.
func updateWith[Update, T any](c *call, update func(Update) (T, error), id func(T) string) (string, error) {
	var up Update
	if err := c.decode(&up); err != nil {
		return "", err
	}
	v, err := update(up)
	if err != nil {
		return "", err
	}
	return id(v), nil
}

func (k kindAPI) listHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		q := c.r.URL.Query()
		known := map[string]filter{}
		for _, f := range k.filters {
			known[f.param] = f
		}
		for p := range q {
			if _, ok := known[p]; !ok {
				names := make([]string, 0, len(known))
				for n := range known {
					names = append(names, n)
				}
				sort.Strings(names)
				return 0, nil, model.WithField(errorf(http.StatusBadRequest, "unknown filter %q on %s; it accepts: %s", p, c.r.URL.Path, strings.Join(names, ", ")), p)
			}
		}
		for p := range q {
			if f := known[p]; f.ref != "" {
				if _, err := s.store.Resolve(c.ctx, f.ref, q.Get(p)); err != nil {
					return 0, nil, model.WithField(err, p)
				}
			}
		}
		w, err := c.world()
		if err != nil {
			return 0, nil, err
		}
		out := []any{}
	next:
		for _, id := range k.ids(w) {
			for p := range q {
				if !slices.Contains(known[p].values(w, id), q.Get(p)) {
					continue next
				}
			}
			v, _ := k.view(w, id)
			out = append(out, v)
		}
		return http.StatusOK, out, nil
	}
}

func (k kindAPI) getHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, err := s.store.Resolve(c.ctx, k.kind, c.ref())
		if err != nil {
			return 0, nil, model.WithField(err, "ref")
		}
		return s.viewResponse(c, k, id, http.StatusOK)
	}
}

func (k kindAPI) createHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, created, err := k.create(c)
		if err != nil {
			return 0, nil, err
		}
		if !created {
			return s.viewResponse(c, k, id, http.StatusOK)
		}
		c.w.Header().Set("Location", APIPrefix+k.path+"/"+id)
		return s.viewResponse(c, k, id, http.StatusCreated)
	}
}

func (k kindAPI) updateHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, err := k.update(c)
		if err != nil {
			return 0, nil, err
		}
		return s.viewResponse(c, k, id, http.StatusOK)
	}
}

func (k kindAPI) deleteHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		if id, err := s.store.Resolve(c.ctx, k.kind, c.ref()); err == nil {
			c.object = &objectRef{Kind: k.kind, ID: id, Name: c.ref()}
		}
		if err := k.del(c.ctx, c.ref()); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, nil
	}
}

// viewResponse answers the view of one object with its ETag.
func (s *Server) viewResponse(c *call, k kindAPI, id string, status int) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	v, ok := k.view(w, id)
	if !ok {
		return 0, nil, fmt.Errorf("%s %s vanished while reading it; retry: %w", k.kind, id, model.ErrConflict)
	}
	if rev := w.revs[k.kind+"/"+id]; rev > 0 {
		c.w.Header().Set("ETag", fmt.Sprintf("%q", strconv.FormatInt(rev, 10)))
	}
	c.object = &objectRef{Kind: k.kind, ID: id, Name: w.nameOf(k.kind, id)}
	return status, v, nil
}

func (c *call) world() (*world, error) { return c.srv.loadWorld(c.ctx) }

func (s *Server) mapVolume(c *call) (int, any, error) {
	var req model.MapSpec
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	v, err := s.store.MapVolume(c.ctx, c.ref(), req)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindVolume), v.ID, http.StatusOK)
}

type unmapRequest struct {
	Host string `json:"host"`
}

func (s *Server) unmapVolume(c *call) (int, any, error) {
	var req unmapRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	v, err := s.store.UnmapVolume(c.ctx, c.ref(), req.Host)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindVolume), v.ID, http.StatusOK)
}

func (s *Server) kindOf(kind string) kindAPI {
	for _, k := range s.kinds() {
		if k.kind == kind {
			return k
		}
	}
	panic("gateway: unknown kind " + kind)
}

// prepareFunc adapts the DeviceProber to the model's PrepareFunc.
func (s *Server) prepareFunc() model.PrepareFunc {
	if s.cfg.Devices == nil {
		return nil
	}
	return func(ctx context.Context, sds model.SDS, clusterID, deviceID, path string, force bool) (int64, error) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return s.cfg.Devices.PrepareDevice(ctx, sds.Address, clusterID, deviceID, path, force)
	}
}

type bootstrapRequest struct {
	Name string `json:"name"`
}

func (s *Server) bootstrap(c *call) (int, any, error) {
	var req bootstrapRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	sys, created, err := s.store.Bootstrap(c.ctx, req.Name)
	if err != nil {
		return 0, nil, err
	}
	if !created {
		if sys.Name != req.Name {
			return 0, nil, fmt.Errorf("the system is already bootstrapped as %q (id %s); a system is bootstrapped once: %w", sys.Name, sys.ID, model.ErrExists)
		}
		return http.StatusOK, sys, nil
	}
	return http.StatusCreated, sys, nil
}

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// APIPrefix is the root of the REST API.
const APIPrefix = "/api/v1"

// route is one endpoint. role is the least role allowed (admin > operator >
// monitor); "" means no login is needed. The route table is the single
// source of what is served; a test checks it against openapi.json.
type route struct {
	method string
	path   string // ServeMux pattern path, e.g. /api/v1/volumes/{ref}
	role   string
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
}

func (c *call) decode(v any) error {
	if err := decodeJSON(c.r.Body, v); err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	return nil
}

func (c *call) ref() string { return c.r.PathValue("ref") }

// rawBody is written as is (metrics, the OpenAPI document).
type rawBody struct {
	contentType string
	data        []byte
}

func (s *Server) apiRoutes() []route {
	const A, O, M = model.RoleAdmin, model.RoleOperator, model.RoleMonitor
	p := func(s string) string { return APIPrefix + s }
	rs := []route{
		{"POST", p("/login"), "", s.login},
		{"POST", p("/bootstrap/admin-password"), "", s.redeemBootstrapToken},
		{"POST", p("/logout"), M, s.logout},
		{"GET", p("/openapi.json"), "", s.openapi},
		{"GET", p("/system"), M, s.getSystem},
		{"POST", p("/system/bootstrap"), A, s.bootstrap},
		{"GET", "/metrics", "", s.metrics},
	}
	for _, k := range s.kinds() {
		rs = append(rs,
			route{"GET", p(k.path), k.read, k.listHandler},
			route{"POST", p(k.path), k.write, k.createHandler(s)},
			route{"GET", p(k.path + "/{ref}"), k.read, k.getHandler(s)},
			route{"DELETE", p(k.path + "/{ref}"), k.write, k.deleteHandler(s)},
		)
	}
	rs = append(rs,
		route{"PATCH", p("/volumes/{ref}"), O, s.resizeVolume},
		route{"POST", p("/volumes/{ref}/map"), O, s.mapVolume},
		route{"POST", p("/volumes/{ref}/unmap"), O, s.unmapVolume},
		route{"PATCH", p("/users/{ref}"), A, s.updateUser},
		route{"PATCH", p("/pools/{ref}"), A, s.updatePool},
		route{"PATCH", p("/sds/{ref}"), A, s.updateSDS},
		route{"POST", p("/sds/{ref}/maintenance"), O, s.enterSDSMaintenance},
		route{"DELETE", p("/sds/{ref}/maintenance"), O, s.exitSDSMaintenance},
		route{"POST", p("/faultsets/{ref}/maintenance"), O, s.enterFaultSetMaintenance},
		route{"DELETE", p("/faultsets/{ref}/maintenance"), O, s.exitFaultSetMaintenance},
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
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s; the API is described at %s/openapi.json", r.URL.Path, APIPrefix))
	})
	return mux
}

// wrap authenticates, authorises, runs the handler, writes the response and
// the audit line of a mutating request.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{srv: s, ctx: r.Context(), w: w, r: r}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody+1)
		status, body, err := s.serve(c, rt)
		if err != nil {
			status = statusOf(err)
			msg := err.Error()
			if status == http.StatusInternalServerError {
				s.log.Error("gateway request failed", "method", r.Method, "path", r.URL.Path, "err", err)
				msg = "internal error: " + msg
			}
			body = errorBody{Error: msg}
		}
		switch b := body.(type) {
		case nil:
			w.WriteHeader(status)
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
	return rt.h(c)
}

// kindAPI serves list/get/create/delete of one kind of object.
type kindAPI struct {
	kind        string
	path        string // under APIPrefix, e.g. /volumes
	read, write string // least roles
	// list returns the views of all objects, sorted by name.
	list func(w *world) any
	// view returns the view of one object by id.
	view   func(w *world, id string) (any, bool)
	create func(c *call) (id string, err error)
	del    func(ctx context.Context, ref string) error
}

func (s *Server) kinds() []kindAPI {
	const A, O, M = model.RoleAdmin, model.RoleOperator, model.RoleMonitor
	st := s.store
	return []kindAPI{
		{kind: model.KindPD, path: "/pds", read: M, write: A,
			list: func(w *world) any {
				return mapViews(sortedByName(w.pds, func(v model.ProtectionDomain) string { return v.Name }), w.pdView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.pds[id]; return w.pdView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.PDSpec) (model.ProtectionDomain, error) { return st.CreatePD(c.ctx, spec) },
					func(v model.ProtectionDomain) string { return v.ID })
			},
			del: st.DeletePD},
		{kind: model.KindFaultSet, path: "/faultsets", read: M, write: A,
			list: func(w *world) any {
				return mapViews(sortedByName(w.faultSets, func(v model.FaultSet) string { return v.Name }), w.faultSetView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.faultSets[id]; return w.faultSetView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.FaultSetSpec) (model.FaultSet, error) { return st.CreateFaultSet(c.ctx, spec) },
					func(v model.FaultSet) string { return v.ID })
			},
			del: st.DeleteFaultSet},
		{kind: model.KindSDS, path: "/sds", read: M, write: A,
			list: func(w *world) any {
				return mapViews(sortedByName(w.sdss, func(v model.SDS) string { return v.Name }), w.sdsView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.sdss[id]; return w.sdsView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.SDSSpec) (model.SDS, error) { return st.CreateSDS(c.ctx, spec) },
					func(v model.SDS) string { return v.ID })
			},
			del: st.DeleteSDS},
		{kind: model.KindDevice, path: "/devices", read: M, write: A,
			list: func(w *world) any {
				return mapViews(sortedByName(w.devices, func(v model.Device) string { return v.Name }), w.deviceView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.devices[id]; return w.deviceView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.DeviceSpec) (model.Device, error) {
					return st.AddDevice(c.ctx, spec, s.prepareFunc())
				}, func(v model.Device) string { return v.ID })
			},
			del: st.DeleteDevice},
		{kind: model.KindPool, path: "/pools", read: M, write: A,
			list: func(w *world) any {
				return mapViews(sortedByName(w.pools, func(v model.StoragePool) string { return v.Name }), w.poolView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.pools[id]; return w.poolView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.PoolSpec) (model.StoragePool, error) { return st.CreatePool(c.ctx, spec) },
					func(v model.StoragePool) string { return v.ID })
			},
			del: st.DeletePool},
		{kind: model.KindVolume, path: "/volumes", read: M, write: O,
			list: func(w *world) any {
				return mapViews(sortedByName(w.volumes, func(v model.Volume) string { return v.Name }), w.volumeView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.volumes[id]; return w.volumeView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.VolumeSpec) (model.Volume, error) { return st.CreateVolume(c.ctx, spec) },
					func(v model.Volume) string { return v.ID })
			},
			del: st.DeleteVolume},
		{kind: model.KindHost, path: "/hosts", read: M, write: O,
			list: func(w *world) any {
				return mapViews(sortedByName(w.hosts, func(v model.Host) string { return v.Name }), w.hostView)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.hosts[id]; return w.hostView(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.HostSpec) (model.Host, error) { return st.CreateHost(c.ctx, spec) },
					func(v model.Host) string { return v.ID })
			},
			del: st.DeleteHost},
		// Users are admin-only, reads included: the list of accounts and
		// their roles is security-relevant.
		{kind: model.KindUser, path: "/users", read: A, write: A,
			list: func(w *world) any {
				return mapViews(sortedByName(w.users, func(v model.User) string { return v.Name }), userViewOf)
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.users[id]; return userViewOf(v), ok },
			create: func(c *call) (string, error) {
				return createWith(c, func(spec model.UserSpec) (model.User, error) { return st.CreateUser(c.ctx, spec) },
					func(v model.User) string { return v.Name })
			},
			del: st.DeleteUser},
	}
}

func mapViews[T, V any](in []T, f func(T) V) []V {
	out := make([]V, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

// createWith decodes the request into Spec and runs create.
func createWith[Spec, T any](c *call, create func(Spec) (T, error), id func(T) string) (string, error) {
	var spec Spec
	if err := c.decode(&spec); err != nil {
		return "", err
	}
	v, err := create(spec)
	if err != nil {
		return "", err
	}
	return id(v), nil
}

func (k kindAPI) listHandler(c *call) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, k.list(w), nil
}

func (k kindAPI) getHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, err := s.store.Resolve(c.ctx, k.kind, c.ref())
		if err != nil {
			return 0, nil, err
		}
		return s.viewResponse(c, k, id, http.StatusOK)
	}
}

func (k kindAPI) createHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, err := k.create(c)
		if err != nil {
			return 0, nil, err
		}
		return s.viewResponse(c, k, id, http.StatusCreated)
	}
}

func (k kindAPI) deleteHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		if err := k.del(c.ctx, c.ref()); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, nil
	}
}

func (s *Server) viewResponse(c *call, k kindAPI, id string, status int) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	v, ok := k.view(w, id)
	if !ok {
		return 0, nil, fmt.Errorf("%s %s vanished while reading it; retry: %w", k.kind, id, model.ErrConflict)
	}
	return status, v, nil
}

func (c *call) world() (*world, error) { return c.srv.loadWorld(c.ctx) }

type resizeRequest struct {
	Size int64 `json:"size"` // bytes
}

func (s *Server) resizeVolume(c *call) (int, any, error) {
	var req resizeRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	v, err := s.store.ResizeVolume(c.ctx, c.ref(), req.Size)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindVolume), v.ID, http.StatusOK)
}

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

func (s *Server) updateUser(c *call) (int, any, error) {
	var req model.UserUpdate
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	u, err := s.store.UpdateUser(c.ctx, c.ref(), req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, userViewOf(u), nil
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

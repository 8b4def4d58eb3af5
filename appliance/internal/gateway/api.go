// The REST route table and the request pipeline every route goes through:
// decode, login and role check, If-Match, error mapping, audit.

package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

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
	// onBehalfOf is the person a delegate user acts for (OnBehalfOfHeader).
	onBehalfOf string
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
		{"GET", p("/system/certificates"), M, "", s.listCertificates},
		{"GET", p("/system/versions"), M, "", s.listVersions},
		{"GET", p("/system/join-tokens"), A, "", s.listJoinTokens},
		{"POST", p("/system/join-tokens"), A, "", s.createJoinToken},
		{"DELETE", p("/system/join-tokens/{id}"), A, "", s.revokeJoinToken},
		{"GET", p("/upgrade/bundles"), M, "", s.listBundles},
		{"POST", p("/upgrade/bundles"), A, "", s.uploadBundle},
		{"GET", p("/upgrade/svms"), M, "", s.listUpgradeSVMs},
		{"POST", p("/upgrade/svms/{name}"), A, "", s.orderUpgrade},
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
		route{"GET", p("/svms"), M, "", s.listSVMs},
		route{"GET", p("/svms/{name}"), M, "", s.getSVM},
		route{"PUT", p("/svms/{name}"), A, "", s.putSVM},
		route{"DELETE", p("/svms/{name}"), A, "", s.deleteSVM},
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
	return withSecurityHeaders(mux)
}

// wrap authenticates, authorises, runs the handler, writes the response and
// the audit event of a mutating request (refused ones included).
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{srv: s, ctx: r.Context(), w: w, r: r}
		limit := int64(maxBody)
		if l, ok := bodyLimits[rt.method+" "+rt.path]; ok {
			limit = l
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit+1)
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
			attrs := []any{"user", user, "method", r.Method, "path", r.URL.Path, "status", status, "remote", r.RemoteAddr}
			if c.onBehalfOf != "" {
				attrs = append(attrs, "on_behalf_of", c.onBehalfOf)
			}
			s.log.Info("audit", attrs...)
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
		if err := c.readOnBehalfOf(); err != nil {
			return 0, nil, err
		}
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

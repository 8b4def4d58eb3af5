package gateway

// MDM cluster membership: the embedded etcd members (voters, learners) and
// their Cairn roles. Changes go through etcd's own safe reconfiguration: a
// new member joins as a learner (it cannot break quorum while it catches
// up) and the observer promotes it once etcd agrees it is in sync; a
// removal that etcd finds unsafe (quorum) is refused by etcd itself.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MDMRole is the value under model.MDMRolePrefix.
type MDMRole struct {
	TieBreaker bool `json:"tie_breaker"`
}

type mdmMember struct {
	Name        string   `json:"name"`
	ID          string   `json:"id"` // etcd member id, 16 hex digits
	PeerURLs    []string `json:"peer_urls"`
	ClientURLs  []string `json:"client_urls"`
	Learner     bool     `json:"learner"`
	Started     bool     `json:"started"` // has joined (a freshly added member has no name until it starts)
	RaftLeader  bool     `json:"raft_leader"`
	TieBreaker  bool     `json:"tie_breaker"`
	CairnLeader bool     `json:"cairn_leader"` // runs the control loop
}

type addMemberRequest struct {
	Name       string `json:"name"`
	PeerURL    string `json:"peer_url"`
	TieBreaker bool   `json:"tie_breaker,omitempty"`
}

type addMemberResponse struct {
	mdmMember
	// InitialCluster is the --initial-cluster value to start the new
	// member with (`cairn mdm --initial-cluster ...`).
	InitialCluster string `json:"initial_cluster"`
}

type moveLeaderRequest struct {
	Name string `json:"name"`
}

func etcdErr(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrGRPCNoLeader) || errors.Is(err, rpctypes.ErrNoLeader) {
		return fmt.Errorf("%s: %v; check that a majority of the MDMs run: %w", what, err, model.ErrUnavailable)
	}
	return &apiError{status: http.StatusConflict, code: CodeConflict, msg: fmt.Sprintf("%s: etcd refused: %v", what, rpctypes.ErrorDesc(err))}
}

// members lists the etcd members with their roles.
func (s *Server) members(ctx context.Context) ([]mdmMember, *clientv3.MemberListResponse, error) {
	ml, err := s.cfg.Etcd.MemberList(ctx)
	if err != nil {
		return nil, nil, etcdErr("list MDM members", err)
	}
	leader := s.raftLeader(ctx)
	roles := map[string]MDMRole{}
	r, err := s.cfg.Etcd.Get(ctx, model.MDMRolePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, etcdErr("read MDM roles", err)
	}
	for _, kv := range r.Kvs {
		var role MDMRole
		if json.Unmarshal(kv.Value, &role) == nil {
			roles[strings.TrimPrefix(string(kv.Key), model.MDMRolePrefix)] = role
		}
	}
	w, err := s.loadWorld(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := []mdmMember{}
	for _, m := range ml.Members {
		name := m.Name
		if name == "" {
			name = pendingName(m)
		}
		out = append(out, mdmMember{Name: name, ID: fmt.Sprintf("%016x", m.ID), PeerURLs: nonNil(m.PeerURLs), ClientURLs: nonNil(m.ClientURLs),
			Learner: m.IsLearner, Started: m.Name != "", RaftLeader: m.ID == leader, TieBreaker: roles[name].TieBreaker, CairnLeader: name == w.leader})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, ml, nil
}

// raftLeader returns the id of etcd's raft leader (0 if no endpoint
// answers). It asks every endpoint at once and takes the first answer: a
// member that is down must not hold up the list (a status request to it
// waits for a connection that never comes).
func (s *Server) raftLeader(ctx context.Context) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel() // ends the requests still waiting
	eps := s.cfg.Etcd.Endpoints()
	leaders := make(chan uint64, len(eps))
	for _, ep := range eps {
		go func() {
			var id uint64
			if st, err := s.cfg.Etcd.Status(ctx, ep); err == nil {
				id = st.Leader
			}
			leaders <- id
		}()
	}
	for range eps {
		if id := <-leaders; id != 0 {
			return id
		}
	}
	return 0
}

// pendingName names a member added but not started yet: etcd knows only
// its peer URL, the role key its name.
func pendingName(m *pb.Member) string {
	if len(m.PeerURLs) > 0 {
		return "(not started) " + m.PeerURLs[0]
	}
	return fmt.Sprintf("(not started) %016x", m.ID)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) listMDMMembers(c *call) (int, any, error) {
	ms, _, err := s.members(c.ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ms, nil
}

func (s *Server) addMDMMember(c *call) (int, any, error) {
	var req addMemberRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := model.ValidateName(model.KindUser, req.Name); err != nil {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "MDM member name %q: use 1-64 characters from A-Z a-z 0-9 . _ -", req.Name), "name")
	}
	u, err := url.Parse(req.PeerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "peer_url %q must be http(s)://host:port, the new member's etcd peer address, e.g. https://10.0.0.14:2380", req.PeerURL), "peer_url")
	}
	ms, ml, err := s.members(c.ctx)
	if err != nil {
		return 0, nil, err
	}
	for _, m := range ms {
		for _, p := range m.PeerURLs {
			if p == req.PeerURL && (m.Name == req.Name || !m.Started) {
				return http.StatusOK, addMemberResponse{m, initialCluster(ml, req.Name, req.PeerURL)}, nil // a repeat
			}
			if p == req.PeerURL {
				return 0, nil, model.WithField(&apiError{status: http.StatusConflict, code: CodeAlreadyExists, msg: fmt.Sprintf("MDM member %s already has peer URL %s", m.Name, p)}, "peer_url")
			}
		}
		if m.Name == req.Name {
			return 0, nil, model.WithField(&apiError{status: http.StatusConflict, code: CodeAlreadyExists, msg: fmt.Sprintf("MDM member %q already exists; choose another name", req.Name)}, "name")
		}
	}
	role, _ := json.Marshal(MDMRole{TieBreaker: req.TieBreaker})
	if _, err := s.cfg.Etcd.Put(c.ctx, model.MDMRolePrefix+req.Name, string(role)); err != nil {
		return 0, nil, etcdErr("store MDM role", err)
	}
	r, err := s.cfg.Etcd.MemberAddAsLearner(c.ctx, []string{req.PeerURL})
	if err != nil {
		s.cfg.Etcd.Delete(context.WithoutCancel(c.ctx), model.MDMRolePrefix+req.Name)
		return 0, nil, etcdErr("add MDM member "+req.Name, err)
	}
	m := mdmMember{Name: req.Name, ID: fmt.Sprintf("%016x", r.Member.ID), PeerURLs: []string{req.PeerURL}, ClientURLs: []string{}, Learner: true, TieBreaker: req.TieBreaker}
	c.w.Header().Set("Location", APIPrefix+"/mdm/members/"+req.Name)
	return http.StatusCreated, addMemberResponse{m, initialCluster(&clientv3.MemberListResponse{Members: r.Members}, req.Name, req.PeerURL)}, nil
}

// initialCluster renders name=peerURL for every member, the new one named.
func initialCluster(ml *clientv3.MemberListResponse, name, peer string) string {
	var parts []string
	seen := false
	for _, m := range ml.Members {
		n := m.Name
		for _, p := range m.PeerURLs {
			if p == peer {
				n, seen = name, true
			}
		}
		for _, p := range m.PeerURLs {
			parts = append(parts, n+"="+p)
		}
	}
	if !seen {
		parts = append(parts, name+"="+peer)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// findMember resolves a member by name, etcd id or (not started) peer URL.
func findMember(ms []mdmMember, ref string) (mdmMember, bool) {
	for _, m := range ms {
		if m.Name == ref || m.ID == ref || (!m.Started && len(m.PeerURLs) > 0 && m.PeerURLs[0] == ref) {
			return m, true
		}
	}
	return mdmMember{}, false
}

func (s *Server) removeMDMMember(c *call) (int, any, error) {
	ref := c.r.PathValue("name")
	ms, _, err := s.members(c.ctx)
	if err != nil {
		return 0, nil, err
	}
	m, ok := findMember(ms, ref)
	if !ok {
		return 0, nil, model.WithField(errorf(http.StatusNotFound, "MDM member %q not found; list them with `cairnctl mdm ls`", ref), "ref")
	}
	voters := 0
	for _, o := range ms {
		if !o.Learner {
			voters++
		}
	}
	if !m.Learner && voters <= 1 {
		return 0, nil, &apiError{status: http.StatusConflict, code: CodeInUse, msg: fmt.Sprintf("MDM member %s is the only voting member; add another member first", m.Name)}
	}
	var id uint64
	fmt.Sscanf(m.ID, "%x", &id)
	if _, err := s.cfg.Etcd.MemberRemove(c.ctx, id); err != nil {
		return 0, nil, etcdErr("remove MDM member "+m.Name, err)
	}
	s.cfg.Etcd.Delete(c.ctx, model.MDMRolePrefix+m.Name)
	c.object = &objectRef{Kind: "mdm", ID: m.ID, Name: m.Name}
	return http.StatusNoContent, nil, nil
}

// The hand-over of the control loop (POST /mdm/leader): the request's
// lease, so that one nobody honours dies by itself, and how long the call
// waits for it to be honoured.
const (
	leaderHandoverTTL  = 60 // seconds
	leaderHandoverWait = 15 * time.Second
)

// moveMDMLeader makes a full member both etcd's raft leader and the Cairn
// leader (the control loop). etcd serves MoveLeader only on the current
// leader, so that request goes to the leader's client URL; the control
// loop moves through a hand-over request the elected MDM honours
// (mdm/handover.go). The call answers once both have moved.
func (s *Server) moveMDMLeader(c *call) (int, any, error) {
	var req moveLeaderRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	ms, _, err := s.members(c.ctx)
	if err != nil {
		return 0, nil, err
	}
	target, ok := findMember(ms, req.Name)
	if !ok {
		return 0, nil, model.WithField(errorf(http.StatusNotFound, "MDM member %q not found; list them with `cairnctl mdm ls`", req.Name), "name")
	}
	if target.Learner || target.TieBreaker {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "MDM member %s is a learner or a tie-breaker and cannot lead; pick a full member", target.Name), "name")
	}
	if target.RaftLeader && target.CairnLeader {
		return http.StatusOK, map[string]string{"leader": target.Name}, nil // a repeat
	}
	st := model.NewStore(s.cfg.Etcd)
	cands, err := st.ElectionCandidates(c.ctx)
	if err != nil {
		return 0, nil, etcdErr("read the MDM election", err)
	}
	if !slices.Contains(cands, target.Name) {
		return 0, nil, fmt.Errorf("MDM member %s does not campaign for the control loop (it is down or still starting); start its `cairn mdm`, check `cairnctl mdm ls` and retry: %w", target.Name, model.ErrUnavailable)
	}
	if !target.RaftLeader {
		if err := s.moveRaftLeader(c.ctx, ms, target); err != nil {
			return 0, nil, err
		}
	}
	if !target.CairnLeader {
		l, err := s.cfg.Etcd.Grant(c.ctx, leaderHandoverTTL)
		if err != nil {
			return 0, nil, etcdErr("request the hand-over to "+target.Name, err)
		}
		// An answer is final: a request not honoured in time is
		// withdrawn (unless a newer one replaced it: the key is then
		// under that one's lease).
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
			defer cancel()
			s.cfg.Etcd.Revoke(rctx, l.ID)
		}()
		if _, err := s.cfg.Etcd.Put(c.ctx, model.LeaderHandoverKey, target.Name, clientv3.WithLease(l.ID)); err != nil {
			return 0, nil, etcdErr("request the hand-over to "+target.Name, err)
		}
	}
	deadline := time.Now().Add(leaderHandoverWait)
	for {
		if cands, err := st.ElectionCandidates(c.ctx); err == nil && len(cands) > 0 && cands[0] == target.Name {
			if ms, _, err := s.members(c.ctx); err == nil {
				if m, ok := findMember(ms, target.Name); ok && m.RaftLeader && m.CairnLeader {
					return http.StatusOK, map[string]string{"leader": target.Name}, nil
				}
			}
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			break
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	return 0, nil, fmt.Errorf("MDM member %s did not become both raft and control-loop leader within %s (the request is withdrawn); check `cairnctl mdm ls` and the MDM logs, and retry: %w",
		target.Name, leaderHandoverWait, model.ErrUnavailable)
}

// moveRaftLeader asks etcd's current raft leader to transfer its leadership
// to target.
func (s *Server) moveRaftLeader(ctx context.Context, ms []mdmMember, target mdmMember) error {
	var leader mdmMember
	for _, m := range ms {
		if m.RaftLeader {
			leader = m
		}
	}
	if len(leader.ClientURLs) == 0 {
		return fmt.Errorf("no MDM leader known; retry in a few seconds: %w", model.ErrUnavailable)
	}
	conn, err := s.cfg.Etcd.Dial(leader.ClientURLs[0])
	if err != nil {
		return etcdErr("connect to the MDM leader "+leader.Name, err)
	}
	defer conn.Close()
	var id uint64
	fmt.Sscanf(target.ID, "%x", &id)
	if _, err := clientv3.NewMaintenanceFromMaintenanceClient(pb.NewMaintenanceClient(conn), s.cfg.Etcd).MoveLeader(ctx, id); err != nil {
		return etcdErr("move the MDM leadership to "+target.Name, err)
	}
	return nil
}

// promoteLearners promotes every learner etcd finds in sync (it refuses the
// others, which are tried again next time).
func (s *Server) promoteLearners(ctx context.Context) {
	ml, err := s.cfg.Etcd.MemberList(ctx)
	if err != nil {
		return
	}
	for _, m := range ml.Members {
		if m.IsLearner && m.Name != "" {
			if _, err := s.cfg.Etcd.MemberPromote(ctx, m.ID); err == nil {
				s.log.Info("MDM learner promoted to voting member", "member", m.Name)
				s.emit(ctx, Event{Severity: SeverityInfo, Kind: EventState, Object: &objectRef{Kind: "mdm", ID: fmt.Sprintf("%016x", m.ID), Name: m.Name},
					Message: fmt.Sprintf("MDM member %s caught up and became a voting member", m.Name)})
			}
		}
	}
}

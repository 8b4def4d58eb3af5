package mdm

// The one way every Cairn daemon connects to the MDM members' etcd: with
// its certificate (the etcd user is the certificate's role, see rbac.go)
// over https, or without a PKI over plain http.

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClientConfig is the etcd client configuration of a daemon holding id
// (nil: no PKI) for endpoints. With an identity every endpoint must be
// https and the client presents its certificate; without one, every
// endpoint must be http. A mismatch is refused here, with what to change,
// rather than failing later as a silent dial timeout.
//
// Requests etcd refuses for lack of permission are logged on log (once a
// minute per key), naming the key and the etcd user: the daemon's own code
// only sees etcd's "permission denied".
func ClientConfig(endpoints []string, id *pki.Identity, log *slog.Logger) (clientv3.Config, error) {
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return clientv3.Config{}, fmt.Errorf("MDM URL %q: give http(s)://HOST:PORT", ep)
		}
		if id != nil && u.Scheme != "https" {
			return clientv3.Config{}, fmt.Errorf("MDM URL %s is plain http but this daemon has a certificate (--pki): the MDMs serve https with a PKI; use https://%s", ep, u.Host)
		}
		if id == nil && u.Scheme == "https" {
			return clientv3.Config{}, fmt.Errorf("MDM URL %s is https but this daemon has no certificate: give --pki DIR (issue one with 'cairn pki issue')", ep)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: quietZap()}
	user := ""
	if id != nil {
		cfg.TLS = id.HostTLS()
		user = id.Peer().Role
	}
	d := &denials{log: log, user: user, last: map[string]time.Time{}}
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(d.intercept)}
	return cfg, nil
}

// denials logs permission denials.
type denials struct {
	log  *slog.Logger
	user string
	mu   sync.Mutex
	last map[string]time.Time // key -> when last logged
}

func (d *denials) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) != codes.PermissionDenied {
		return err
	}
	keys := requestKeys(req)
	k := method + " " + keys
	d.mu.Lock()
	now := time.Now()
	logIt := now.Sub(d.last[k]) > time.Minute
	if len(d.last) >= 1024 { // bounded: a daemon denied on ever new keys
		clear(d.last)
	}
	if logIt {
		d.last[k] = now
	}
	d.mu.Unlock()
	if logIt {
		d.log.Error("etcd refused a request: permission denied", "keys", keys, "request", method, "etcd_user", d.user,
			"hint", "the certificate's role (etcd user) may not touch these keys; check the daemon's --pki role, or the MDM leader's log for its access setup")
	}
	return err
}

// requestKeys names the keys a KV request touches, for the log.
func requestKeys(req any) string {
	var keys []string
	var ops func(rs []*pb.RequestOp)
	ops = func(rs []*pb.RequestOp) {
		for _, r := range rs {
			switch {
			case r.GetRequestPut() != nil:
				keys = append(keys, string(r.GetRequestPut().Key))
			case r.GetRequestRange() != nil:
				keys = append(keys, string(r.GetRequestRange().Key))
			case r.GetRequestDeleteRange() != nil:
				keys = append(keys, string(r.GetRequestDeleteRange().Key))
			case r.GetRequestTxn() != nil:
				ops(r.GetRequestTxn().Success)
				ops(r.GetRequestTxn().Failure)
			}
		}
	}
	switch r := req.(type) {
	case *pb.PutRequest:
		keys = append(keys, string(r.Key))
	case *pb.RangeRequest:
		keys = append(keys, string(r.Key))
	case *pb.DeleteRangeRequest:
		keys = append(keys, string(r.Key))
	case *pb.TxnRequest:
		for _, c := range r.Compare {
			keys = append(keys, string(c.Key))
		}
		ops(r.Success)
		ops(r.Failure)
	case *pb.LeaseRevokeRequest:
		keys = append(keys, fmt.Sprintf("(the keys of lease %x)", r.ID))
	}
	if len(keys) == 0 {
		return "(none: an admin request)"
	}
	return strings.Join(keys, ",")
}

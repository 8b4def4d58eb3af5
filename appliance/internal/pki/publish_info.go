package pki

import (
	"context"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PublishInfo is Publish for a certificate that is not a node identity of
// this PKI, such as the gateway's HTTPS certificate (its own or an admin's,
// reloaded on change): current is called every round and its Info is
// published at model.CertKey(Role, Name) whenever its serial changes, under
// the publisher's lease, until ctx ends. It lets `cairnctl system
// certificates` and the expiry alert see every certificate a client meets.
func PublishInfo(ctx context.Context, cli *clientv3.Client, current func() Info, log *slog.Logger) {
	publish(ctx, cli, current, log)
}

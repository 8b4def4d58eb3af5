package gateway

import (
	"context"
	"encoding/json"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventSecurity is the kind of the events that report refused connections
// (package refusals): an attacker, or a daemon or host with the wrong
// certificate.
const EventSecurity = "security"

// consumeRefusals turns each refusal report of the daemons into one warning
// event and deletes the report in the same transaction: with several
// gateways, each report becomes exactly one event.
func (s *Server) consumeRefusals(ctx context.Context) error {
	r, err := s.cfg.Etcd.Get(ctx, model.RefusedPrefix, clientv3.WithPrefix(), clientv3.WithLimit(100))
	if err != nil {
		return err
	}
	for _, kv := range r.Kvs {
		key := string(kv.Key)
		var b refusals.Batch
		if json.Unmarshal(kv.Value, &b) != nil {
			s.cfg.Etcd.Delete(ctx, key) // not a report: nothing to tell
			continue
		}
		var obj *objectRef
		if b.Role == "sds" {
			if x, err := s.store.GetSDS(ctx, b.Name); err == nil {
				obj = &objectRef{Kind: model.KindSDS, ID: x.ID, Name: x.Name}
			}
		}
		if _, err := s.commitEvent(ctx, Event{Severity: SeverityWarning, Kind: EventSecurity, Object: obj, Message: b.Message()},
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)},
			[]clientv3.Op{clientv3.OpDelete(key)}); err != nil {
			return err
		}
	}
	return nil
}

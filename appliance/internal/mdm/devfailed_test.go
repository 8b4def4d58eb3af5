package mdm_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An SDS may not write model objects, so it reports a failed device with a
// failure report; the leader's controller sets the device's state to error
// with the I/O error and consumes the report. (The chaos device-error
// scenario runs the same with real daemons and an injected EIO.)
func TestDeviceFailureReport(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx := ctxT(t)
	root := etcdtest.Client(t, u, kit.Identity(pki.RoleMDM, "mdm1"))
	sds := etcdtest.Client(t, u, kit.Identity(pki.RoleSDS, "sds1"))

	st := model.NewStore(root)
	dev := model.Device{ID: "d1", Name: "sds1-dev1", SDSID: "s1", PoolID: "p1", Path: "/dev/x", Capacity: 1 << 30, State: model.DeviceNormal}
	if err := st.Create(ctx, model.KindDevice, dev.ID, dev.Name, dev, nil); err != nil {
		t.Fatal(err)
	}
	// The SDS's role cannot mark the device itself ...
	b, _ := json.Marshal(model.Device{ID: "d1", State: model.DeviceError})
	if _, err := sds.Put(ctx, model.Key(model.KindDevice, "d1"), string(b)); !denied(err) {
		t.Fatalf("sds wrote a model object: %v", err)
	}
	// ... it reports; reports of unknown devices are dropped.
	for id, cause := range map[string]string{"d1": "read /dev/x: input/output error", "gone": "whatever"} {
		if _, err := sds.Put(ctx, model.DeviceFailedKey(id), cause); err != nil {
			t.Fatalf("sds report: %v", err)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&mdm.Controller{Etcd: root, Log: slog.New(slog.DiscardHandler)}).Run(cctx)
	}()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		var got model.Device
		_, err := st.Get(ctx, model.Key(model.KindDevice, "d1"), &got)
		left, lerr := root.Get(ctx, model.DeviceFailedPrefix, clientv3.WithPrefix())
		if err == nil && lerr == nil && got.State == model.DeviceError && len(left.Kvs) == 0 {
			if got.Error != "read /dev/x: input/output error" || got.Name != "sds1-dev1" || got.Path != "/dev/x" {
				t.Fatalf("device after the report: %+v", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: device %+v (%v), reports left %v (%v)", got, err, left, lerr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package model_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

// Cheap password hashes: the cost of the real ones is the point of them.
func init() {
	model.BcryptCost = bcrypt.MinCost
	model.PasswordHashParams = model.Argon2Params{MemoryKiB: 64, Passes: 1, Lanes: 1}
}

const GiB = int64(model.AllocationUnit)

// fakePrepare plays the SDS: it accepts any path and reports 100 GiB, or
// refuses paths containing "busy" like an SDS finding a device in use.
func fakePrepare(calls *int) model.PrepareFunc {
	return func(ctx context.Context, sds model.SDS, clusterID, deviceID, path string, force bool) (int64, error) {
		*calls++
		if clusterID == "" || deviceID == "" {
			return 0, errors.New("missing cluster or device id")
		}
		if strings.Contains(path, "busy") {
			return 0, fmt.Errorf("%s is in use (mounted on /srv): %w", path, model.ErrInUse)
		}
		return 100 * GiB, nil
	}
}

type fixture struct {
	t     *testing.T
	c     *clientv3.Client
	s     *model.Store
	ctx   context.Context
	calls int
}

func newFixture(t *testing.T) *fixture {
	c := etcdtest.Start(t)
	f := &fixture{t: t, c: c, s: model.NewStore(c), ctx: context.Background()}
	if _, created, err := f.s.Bootstrap(f.ctx, "test"); err != nil || !created {
		t.Fatalf("bootstrap: %v %v", created, err)
	}
	return f
}

func (f *fixture) rev() int64 {
	r, err := f.c.Get(f.ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Header.Revision
}

// must returns v or panics on err (a panic fails the test with a stack).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// refused asserts that op fails with sentinel, a message containing want,
// and no write to etcd.
func (f *fixture) refused(name string, sentinel error, want string, op func() error) {
	f.t.Helper()
	before := f.rev()
	err := op()
	if err == nil {
		f.t.Fatalf("%s: succeeded, want error %q", name, want)
	}
	if !errors.Is(err, sentinel) {
		f.t.Errorf("%s: error %q is not %v", name, err, sentinel)
	}
	if !strings.Contains(err.Error(), want) {
		f.t.Errorf("%s: error %q does not say %q", name, err, want)
	}
	if after := f.rev(); after != before {
		f.t.Errorf("%s: etcd revision moved %d -> %d: a refused request changed something", name, before, after)
	}
}

// repeat asserts that op succeeds without writing anything: a repeated
// request that changes nothing.
func (f *fixture) repeat(name string, op func() error) {
	f.t.Helper()
	before := f.rev()
	if err := op(); err != nil {
		f.t.Errorf("%s: %v, want success (a repeat)", name, err)
	}
	if after := f.rev(); after != before {
		f.t.Errorf("%s: etcd revision moved %d -> %d: a repeat changed something", name, before, after)
	}
}

// topology: pd1, fault sets fs1/fs2, SDS a (fs1), b (fs1), c (own), pool p.
func (f *fixture) topology() {
	must(f.s.CreatePD(f.ctx, model.PDSpec{Name: "pd1"}))
	must(f.s.CreateFaultSet(f.ctx, model.FaultSetSpec{Name: "fs1", PD: "pd1"}))
	must(f.s.CreateFaultSet(f.ctx, model.FaultSetSpec{Name: "fs2", PD: "pd1"}))
	must(f.s.CreateSDS(f.ctx, model.SDSSpec{Name: "a", PD: "pd1", FaultSet: "fs1", Address: "127.0.0.1:7001"}))
	must(f.s.CreateSDS(f.ctx, model.SDSSpec{Name: "b", PD: "pd1", FaultSet: "fs1", Address: "127.0.0.1:7002"}))
	must(f.s.CreateSDS(f.ctx, model.SDSSpec{Name: "c", PD: "pd1", Address: "127.0.0.1:7003"}))
	must(f.s.CreatePool(f.ctx, model.PoolSpec{Name: "p", PD: "pd1"}))
}

func (f *fixture) addDevice(name, sds, path string) model.Device {
	f.t.Helper()
	return must(f.s.AddDevice(f.ctx, model.DeviceSpec{Name: name, SDS: sds, Pool: "p", Path: path}, fakePrepare(&f.calls)))
}

func TestVolumeNeedsTwoFaultDomains(t *testing.T) {
	f := newFixture(t)
	f.topology()
	spec := model.VolumeSpec{Name: "v", Pool: "p", Size: 8 * GiB}
	f.refused("empty pool", model.ErrInvalid, `pool "p" has no devices`, func() error {
		_, err := f.s.CreateVolume(f.ctx, spec)
		return err
	})
	f.addDevice("a1", "a", "/var/lib/cairn/a1.img")
	f.addDevice("b1", "b", "/var/lib/cairn/b1.img")
	// Two SDSs, but both in fault set fs1: one fault domain.
	f.refused("one fault set", model.ErrInvalid, "has devices on only 1 fault domain; add devices on another SDS/fault set: two copies need two", func() error {
		_, err := f.s.CreateVolume(f.ctx, spec)
		return err
	})
	// SDS c has no fault set: it is its own domain.
	f.addDevice("c1", "c", "/var/lib/cairn/c1.img")
	v := must(f.s.CreateVolume(f.ctx, spec))
	if !v.Thin || v.Size != 8*GiB || v.Serial != v.ID {
		t.Errorf("volume %+v", v)
	}
	sys := must(f.s.GetSystem(f.ctx))
	if len(v.WWN) != 32 || v.WWN[0] != '6' || v.WWN != model.VolumeWWN(sys.ID, v.ID) || !strings.HasSuffix(v.WWN, v.ID) {
		t.Errorf("WWN %q", v.WWN)
	}
	other := model.VolumeWWN("another-system", v.ID)
	if other == v.WWN {
		t.Error("WWN does not depend on the system id")
	}
}

func TestVolumeValidation(t *testing.T) {
	f := newFixture(t)
	f.topology()
	f.addDevice("a1", "a", "/var/lib/cairn/a1.img")
	f.addDevice("c1", "c", "/var/lib/cairn/c1.img")
	create := func(spec model.VolumeSpec) func() error {
		return func() error { _, err := f.s.CreateVolume(f.ctx, spec); return err }
	}
	f.refused("size not multiple", model.ErrInvalid, "not a positive multiple of the allocation unit (1 GiB = 1073741824 bytes)", create(model.VolumeSpec{Name: "v", Pool: "p", Size: 8*GiB + 4096}))
	f.refused("zero size", model.ErrInvalid, "not a positive multiple", create(model.VolumeSpec{Name: "v", Pool: "p", Size: 0}))
	f.refused("negative size", model.ErrInvalid, "not a positive multiple", create(model.VolumeSpec{Name: "v", Pool: "p", Size: -GiB}))
	f.refused("bad name", model.ErrInvalid, "use 1-64 characters", create(model.VolumeSpec{Name: "a b", Pool: "p", Size: GiB}))
	f.refused("id-like name", model.ErrInvalid, "looks like an object id", create(model.VolumeSpec{Name: "0123456789abcdef", Pool: "p", Size: GiB}))
	f.refused("unknown pool", model.ErrNotFound, `pool "nope" not found`, create(model.VolumeSpec{Name: "v", Pool: "nope", Size: GiB}))
	thick := false
	// 200 GiB raw, 10% spare, two copies: 90 GiB usable.
	f.refused("thick too big", model.ErrInvalid, "make the volume thin or add devices", create(model.VolumeSpec{Name: "v", Pool: "p", Size: 91 * GiB, Thin: &thick}))
	v := must(f.s.CreateVolume(f.ctx, model.VolumeSpec{Name: "v", Pool: "p", Size: 80 * GiB, Thin: &thick}))
	f.refused("duplicate", model.ErrExists, `volume "v" already exists`, create(model.VolumeSpec{Name: "v", Pool: "p", Size: GiB}))
	// Thin volumes may overcommit.
	must(f.s.CreateVolume(f.ctx, model.VolumeSpec{Name: "big", Pool: "p", Size: 1000 * GiB}))

	resize := func(ref string, size int64) func() error {
		return func() error { _, err := f.s.ResizeVolume(f.ctx, ref, size); return err }
	}
	f.refused("shrink", model.ErrInvalid, "can only grow", resize("v", 40*GiB))
	f.repeat("same size", resize("v", 80*GiB))
	f.refused("resize not multiple", model.ErrInvalid, "not a positive multiple", resize("v", 80*GiB+1))
	f.refused("thick grow beyond pool", model.ErrInvalid, "make the volume thin", resize("v", 100*GiB))
	f.refused("resize unknown", model.ErrNotFound, "not found", resize("nope", 100*GiB))
	got := must(f.s.ResizeVolume(f.ctx, v.ID, 90*GiB)) // by id
	if got.Size != 90*GiB {
		t.Errorf("size %d", got.Size)
	}
}

func TestMappings(t *testing.T) {
	f := newFixture(t)
	f.topology()
	f.addDevice("a1", "a", "/var/lib/cairn/a1.img")
	f.addDevice("c1", "c", "/var/lib/cairn/c1.img")
	must(f.s.CreateVolume(f.ctx, model.VolumeSpec{Name: "v", Pool: "p", Size: GiB}))
	h := must(f.s.CreateHost(f.ctx, model.HostSpec{Name: "esx1", Type: "iscsi", IQN: "iqn.1998-01.com.VMware:esx1-4c1d2f0a"}))
	if h.IQN != "iqn.1998-01.com.vmware:esx1-4c1d2f0a" {
		t.Errorf("IQN not normalised: %s", h.IQN)
	}
	f.refused("unknown host", model.ErrNotFound, `host "esx9" not found`, func() error {
		_, err := f.s.MapVolume(f.ctx, "v", model.MapSpec{Host: "esx9"})
		return err
	})
	f.repeat("unmap not mapped", func() error {
		_, err := f.s.UnmapVolume(f.ctx, "v", "esx1")
		return err
	})
	v := must(f.s.MapVolume(f.ctx, "v", model.MapSpec{Host: "esx1"}))
	if len(v.Mappings) != 1 || v.Mappings[0].HostID != h.ID {
		t.Fatalf("mappings %+v", v.Mappings)
	}
	f.repeat("map twice", func() error {
		_, err := f.s.MapVolume(f.ctx, "v", model.MapSpec{Host: h.ID})
		return err
	})
	f.refused("map again read-only", model.ErrConflict, "unmap it first to change that", func() error {
		_, err := f.s.MapVolume(f.ctx, "v", model.MapSpec{Host: h.ID, ReadOnly: true})
		return err
	})
	f.refused("delete mapped volume", model.ErrInUse, "unmap it first", func() error { return f.s.DeleteVolume(f.ctx, "v") })
	f.refused("delete mapped host", model.ErrInUse, "unmap them first", func() error { return f.s.DeleteHost(f.ctx, "esx1") })
	v = must(f.s.UnmapVolume(f.ctx, "v", "esx1"))
	if len(v.Mappings) != 0 {
		t.Fatalf("still mapped: %+v", v.Mappings)
	}
	if err := f.s.DeleteVolume(f.ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if err := f.s.DeleteHost(f.ctx, "esx1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Lookup(f.ctx, model.KindVolume, "v"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("name index left behind: %v", err)
	}
}

func TestHostValidation(t *testing.T) {
	f := newFixture(t)
	good := []string{"iqn.1998-01.com.vmware:esx01-4c1d2f0a", "iqn.1993-08.org.debian:01:8f1c2e3d4b5a", "iqn.2001-04.com.example", "eui.02004567A425678D", "naa.52004567ba64678d", "naa.6001405ab2c1d3e4f5a6b7c8d9e0f1a2"}
	for i, iqn := range good {
		if _, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: fmt.Sprintf("h%d", i), Type: "iscsi", IQN: iqn}); err != nil {
			t.Errorf("%s: %v", iqn, err)
		}
	}
	bad := []string{"iqn.98-01.com.vmware:x", "iqn.1998-13.com.vmware", "iqn.1998-01", "iqn.1998-01.-com", "eui.0200", "eui.02004567A425678G", "naa.1234", "foo.bar", "iqn.1998-01.com.vmware:a b", "iqn.1998-01.com." + strings.Repeat("a", 220)}
	for _, iqn := range bad {
		f.refused("iqn "+iqn, model.ErrInvalid, "RFC 3720", func() error {
			_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "bad", Type: "iscsi", IQN: iqn})
			return err
		})
	}
	f.refused("no iqn", model.ErrInvalid, "give its initiator name", func() error {
		_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "x", Type: "iscsi"})
		return err
	})
	f.refused("same iqn", model.ErrExists, "one host per initiator", func() error {
		_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "x", Type: "iscsi", IQN: "IQN.1998-01.com.vmware:ESX01-4c1d2f0a"})
		return err
	})
	f.refused("unknown type", model.ErrInvalid, `use "iscsi" or "nbd"`, func() error {
		_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "x", Type: "fc"})
		return err
	})
	f.refused("nbd with iqn", model.ErrInvalid, "iSCSI hosts only", func() error {
		_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "x", Type: "nbd", IQN: good[0]})
		return err
	})
	f.refused("short chap", model.ErrInvalid, "12 to 255", func() error {
		_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "x", Type: "iscsi", IQN: "iqn.2020-01.org.example:x", CHAPUser: "u", CHAPSecret: "short"})
		return err
	})
	f.refused("duplicate host", model.ErrExists, `host "h0" already exists`, func() error {
		_, err := f.s.CreateHost(f.ctx, model.HostSpec{Name: "h0", Type: "nbd"})
		return err
	})
}

func TestDeviceValidation(t *testing.T) {
	f := newFixture(t)
	f.topology()
	add := func(spec model.DeviceSpec) func() error {
		return func() error { _, err := f.s.AddDevice(f.ctx, spec, fakePrepare(&f.calls)); return err }
	}
	for _, p := range []string{"/dev/sdb", "/dev/sdaa1", "/dev/vdc", "/dev/nvme0n1", "/dev/nvme1n2p3"} {
		f.refused("unstable "+p, model.ErrInvalid, "use /dev/disk/by-id/... or /dev/disk/by-path/... : /dev/sdX names change across reboots", add(model.DeviceSpec{SDS: "a", Pool: "p", Path: p}))
	}
	if f.calls != 0 {
		t.Errorf("the SDS was asked about refused paths %d times", f.calls)
	}
	f.refused("relative path", model.ErrInvalid, "must be absolute", add(model.DeviceSpec{SDS: "a", Pool: "p", Path: "disk.img"}))
	f.refused("unknown sds", model.ErrNotFound, `SDS "zz" not found`, add(model.DeviceSpec{SDS: "zz", Pool: "p", Path: "/dev/disk/by-id/x"}))
	f.refused("in use", model.ErrInUse, `SDS "a" refused device /dev/disk/by-id/busy: /dev/disk/by-id/busy is in use`, add(model.DeviceSpec{SDS: "a", Pool: "p", Path: "/dev/disk/by-id/busy"}))
	d := must(f.s.AddDevice(f.ctx, model.DeviceSpec{SDS: "a", Pool: "p", Path: "/dev/sdb", Force: true}, fakePrepare(&f.calls)))
	if d.Name != "a-sdb" || d.State != model.DeviceNormal || d.Capacity != 100*GiB {
		t.Errorf("device %+v", d)
	}
	f.refused("same path twice", model.ErrExists, "a path can be added once", add(model.DeviceSpec{Name: "other", SDS: "a", Pool: "p", Path: "/dev/sdb", Force: true}))
	// The same path on another SDS is another disk.
	must(f.s.AddDevice(f.ctx, model.DeviceSpec{SDS: "c", Pool: "p", Path: "/dev/sdb", Force: true}, fakePrepare(&f.calls)))
	must(f.s.CreatePD(f.ctx, model.PDSpec{Name: "pd2"}))
	must(f.s.CreatePool(f.ctx, model.PoolSpec{Name: "p2", PD: "pd2"}))
	f.refused("pool of other pd", model.ErrInvalid, "different protection domains", add(model.DeviceSpec{SDS: "a", Pool: "p2", Path: "/dev/disk/by-id/y"}))
}

func TestDeleteInUse(t *testing.T) {
	f := newFixture(t)
	f.topology()
	f.addDevice("a1", "a", "/var/lib/cairn/a1.img")
	f.addDevice("c1", "c", "/var/lib/cairn/c1.img")
	must(f.s.CreateVolume(f.ctx, model.VolumeSpec{Name: "v", Pool: "p", Size: GiB}))
	f.refused("pd", model.ErrInUse, "remove them first", func() error { return f.s.DeletePD(f.ctx, "pd1") })
	f.refused("fault set", model.ErrInUse, "still holds SDS a, b", func() error { return f.s.DeleteFaultSet(f.ctx, "fs1") })
	f.refused("sds", model.ErrInUse, `SDS "a" still has devices a1`, func() error { return f.s.DeleteSDS(f.ctx, "a") })
	f.refused("pool", model.ErrInUse, "remove the volumes first", func() error { return f.s.DeletePool(f.ctx, "p") })
	f.refused("device", model.ErrInUse, "remove the volumes first", func() error { return f.s.DeleteDevice(f.ctx, "a1") })
	f.refused("unknown", model.ErrNotFound, "not found", func() error { return f.s.DeletePool(f.ctx, "nope") })
	// Tear down in order: everything goes.
	for _, step := range []func() error{
		func() error { return f.s.DeleteVolume(f.ctx, "v") },
		func() error { return f.s.DeleteDevice(f.ctx, "a1") },
		func() error { return f.s.DeleteDevice(f.ctx, "c1") },
		func() error { return f.s.DeletePool(f.ctx, "p") },
		func() error { return f.s.DeleteSDS(f.ctx, "a") },
		func() error { return f.s.DeleteSDS(f.ctx, "b") },
		func() error { return f.s.DeleteSDS(f.ctx, "c") },
		func() error { return f.s.DeleteFaultSet(f.ctx, "fs1") },
		func() error { return f.s.DeleteFaultSet(f.ctx, "fs2") },
		func() error { return f.s.DeletePD(f.ctx, "pd1") },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	r := must(f.c.Get(f.ctx, model.Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly()))
	for _, kv := range r.Kvs {
		if string(kv.Key) != model.SystemKey {
			t.Errorf("left behind: %s", kv.Key)
		}
	}
}

func TestTopologyValidation(t *testing.T) {
	f := newFixture(t)
	f.topology()
	f.refused("dup pd", model.ErrExists, `protection domain "pd1" already exists`, func() error {
		_, err := f.s.CreatePD(f.ctx, model.PDSpec{Name: "pd1"})
		return err
	})
	f.refused("sds address", model.ErrInvalid, "must be host:port", func() error {
		_, err := f.s.CreateSDS(f.ctx, model.SDSSpec{Name: "d", PD: "pd1", Address: "10.0.0.1"})
		return err
	})
	f.refused("sds same address", model.ErrExists, "already uses address", func() error {
		_, err := f.s.CreateSDS(f.ctx, model.SDSSpec{Name: "d", PD: "pd1", Address: "127.0.0.1:7001"})
		return err
	})
	f.refused("sds unknown fault set", model.ErrNotFound, `fault set "fs9" not found`, func() error {
		_, err := f.s.CreateSDS(f.ctx, model.SDSSpec{Name: "d", PD: "pd1", FaultSet: "fs9", Address: "127.0.0.1:7009"})
		return err
	})
	spare := 95
	f.refused("spare", model.ErrInvalid, "between 0 and 90", func() error {
		_, err := f.s.CreatePool(f.ctx, model.PoolSpec{Name: "q", PD: "pd1", SparePercent: &spare})
		return err
	})
	sys, created, err := f.s.Bootstrap(f.ctx, "again")
	if err != nil || created || sys.Name != "test" {
		t.Errorf("second bootstrap: %+v %v %v", sys, created, err)
	}
}

func TestUsers(t *testing.T) {
	f := newFixture(t)
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "root", Role: "admin", Password: "correct horse"}))
	f.refused("bad role", model.ErrInvalid, "role \"god\" is unknown", func() error {
		_, err := f.s.CreateUser(f.ctx, model.UserSpec{Name: "x", Role: "god", Password: "12345678"})
		return err
	})
	f.refused("short password", model.ErrInvalid, "8 to 72 bytes", func() error {
		_, err := f.s.CreateUser(f.ctx, model.UserSpec{Name: "x", Role: "monitor", Password: "1234"})
		return err
	})
	f.refused("dup", model.ErrExists, "already exists", func() error {
		_, err := f.s.CreateUser(f.ctx, model.UserSpec{Name: "root", Role: "monitor", Password: "12345678"})
		return err
	})
	f.refused("last admin", model.ErrInUse, "last admin", func() error { return f.s.DeleteUser(f.ctx, "root") })
	f.refused("demote last admin", model.ErrInUse, "last admin", func() error {
		_, err := f.s.UpdateUser(f.ctx, "root", model.UserUpdate{Role: "monitor"})
		return err
	})
	u := must(f.s.Authenticate(f.ctx, "root", "correct horse"))
	if u.Role != "admin" || strings.Contains(u.PasswordHash, "horse") {
		t.Errorf("user %+v", u)
	}
	if _, err := f.s.Authenticate(f.ctx, "root", "wrong"); !errors.Is(err, model.ErrBadCredentials) {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := f.s.Authenticate(f.ctx, "nobody", "x"); !errors.Is(err, model.ErrBadCredentials) {
		t.Errorf("unknown user: %v", err)
	}
	must(f.s.UpdateUser(f.ctx, "root", model.UserUpdate{Password: "battery staple"}))
	if _, err := f.s.Authenticate(f.ctx, "root", "battery staple"); err != nil {
		t.Errorf("new password: %v", err)
	}
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "ops", Role: "admin", Password: "12345678"}))
	if err := f.s.DeleteUser(f.ctx, "root"); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentCreates: racing requests for one name yield one object.
func TestConcurrentCreates(t *testing.T) {
	f := newFixture(t)
	f.topology()
	f.addDevice("a1", "a", "/var/lib/cairn/a1.img")
	f.addDevice("c1", "c", "/var/lib/cairn/c1.img")
	const n = 8
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := f.s.CreateVolume(f.ctx, model.VolumeSpec{Name: "same", Pool: "p", Size: GiB})
			errs <- err
		}()
	}
	ok := 0
	for i := 0; i < n; i++ {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, model.ErrExists), errors.Is(err, model.ErrConflict):
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	vols := must(model.List[model.Volume](f.ctx, f.s, model.KindVolume))
	if ok != 1 || len(vols) != 1 {
		t.Errorf("%d creates succeeded, %d volumes stored; want 1 and 1", ok, len(vols))
	}
}

// TestDeleteParentRacesChild: a host deletion racing a mapping to it never
// leaves a volume mapped to a deleted host.
func TestDeleteParentRacesChild(t *testing.T) {
	for round := 0; round < 5; round++ {
		f := newFixture(t)
		f.topology()
		f.addDevice("a1", "a", "/var/lib/cairn/a1.img")
		f.addDevice("c1", "c", "/var/lib/cairn/c1.img")
		must(f.s.CreateVolume(f.ctx, model.VolumeSpec{Name: "v", Pool: "p", Size: GiB}))
		must(f.s.CreateHost(f.ctx, model.HostSpec{Name: "h", Type: "nbd"}))
		done := make(chan error, 2)
		go func() { _, err := f.s.MapVolume(f.ctx, "v", model.MapSpec{Host: "h"}); done <- err }()
		go func() { done <- f.s.DeleteHost(f.ctx, "h") }()
		<-done
		<-done
		v := must(f.s.GetVolume(f.ctx, "v"))
		_, herr := f.s.GetHost(f.ctx, "h")
		if len(v.Mappings) > 0 && herr != nil {
			t.Fatalf("round %d: volume mapped to deleted host: %+v", round, v.Mappings)
		}
	}
}

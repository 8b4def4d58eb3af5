package sds_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// TestRogueFrontendCannotWriteCopies: a frontend's certificate (nbd) and a
// gateway's may not send what only SDSs send — whole-chunk puts, replica
// writes behind the primary's back, chunk lists — nor may the gateway
// write volumes. Every attempt is refused with StatusForbidden, logged,
// and changes nothing on any device; the same requests from an SDS
// certificate are not forbidden (the role, not the request's form, is what
// is refused).
func TestRogueFrontendCannotWriteCopies(t *testing.T) {
	log := &testcluster.LogBuffer{}
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 64 * MiB, PGCount: 8, LogTo: log})
	vol := c.CreateVolume("v", 8*MiB, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	good := bytes.Repeat([]byte("legit data "), 64<<10/11+1)[:64<<10]
	if err := vol.WriteAt(ctx, good, 0, 0); err != nil {
		t.Fatal(err)
	}
	rogueData := make([]byte, model.ChunkSize)
	if _, err := rand.Read(rogueData); err != nil {
		t.Fatal(err)
	}
	requests := func(epoch uint64) map[string]*wire.Request {
		return map[string]*wire.Request{
			"opcode 32":                 {Op: wire.OpChunkPut, Volume: vol.ID(), Offset: 0, Length: model.ChunkSize, Epoch: epoch, Payload: rogueData},
			"opcode 3 with FlagReplica": {Op: wire.OpWrite, Flags: wire.FlagReplica, Volume: vol.ID(), Offset: 0, Length: 4096, Epoch: epoch, Payload: rogueData[:4096]},
			"opcode 30":                 {Op: wire.OpChunkList, Offset: 0, Epoch: epoch, Payload: []byte(c.PoolID)},
		}
	}
	send := func(sec *wire.Security, addr string, req *wire.Request) error {
		p := wire.NewClient(addr, 1)
		p.Security = sec
		defer p.Close()
		_, err := p.Do(ctx, req, nil)
		return err
	}
	nbd := c.Security(pki.RoleNBD, "rogue-nbd")
	for _, s := range c.SDSs {
		for what, req := range requests(c.Cat.Epoch()) {
			if err := send(nbd, s.Addr, req); !wire.IsStatus(err, wire.StatusForbidden) {
				t.Fatalf("nbd certificate sent %s to %s: %v; want forbidden", what, s.Name, err)
			}
		}
	}
	gw := c.Security(pki.RoleGateway, "rogue-gateway")
	if err := send(gw, c.SDSs[0].Addr, &wire.Request{Op: wire.OpWrite, Volume: vol.ID(), Length: 4096, Epoch: c.Cat.Epoch(), Payload: rogueData[:4096]}); !wire.IsStatus(err, wire.StatusForbidden) {
		t.Fatalf("gateway certificate wrote a volume: %v; want forbidden", err)
	}

	// Nothing changed: the volume reads what the legit client wrote, and
	// no device holds a byte pattern of the rogue data.
	got := make([]byte, len(good))
	if err := vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("volume changed by refused requests (err %v)", err)
	}
	if err := vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.SDSs {
		for _, dev := range s.Devices {
			b, err := os.ReadFile(dev)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, rogueData[:64]) || bytes.Contains(b, rogueData[model.ChunkSize/2:model.ChunkSize/2+64]) {
				t.Fatalf("device %s holds rogue data", dev)
			}
		}
	}
	// Every refusal is logged (each SDS logs each kind once at least).
	for what := range requests(0) {
		for _, s := range c.SDSs {
			log.WaitLine(t, "data-path request refused", "sds="+s.Name, "rogue-nbd", what)
		}
	}
	log.WaitLine(t, "data-path request refused", "rogue-gateway", "opcode 3")

	// Control: the same requests from an SDS certificate pass the role
	// check (whatever the SDS then answers), so the refusals above were
	// the roles'.
	peer := c.Security(pki.RoleSDS, "sds-control")
	for what, req := range requests(c.Cat.Epoch()) {
		req.Payload = append([]byte(nil), req.Payload...)
		if err := send(peer, c.SDSs[0].Addr, req); wire.IsStatus(err, wire.StatusForbidden) {
			t.Fatalf("sds certificate refused %s: %v", what, err)
		}
	}
}

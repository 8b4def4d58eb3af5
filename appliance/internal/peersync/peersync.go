// Package peersync keeps an SVM's firewall admitting the SVMs of its system as the
// system model in etcd knows them now, not only as the deployment settings knew
// them at first boot.
//
// Source of truth: the model. Every SVM records itself under model.SVMKey (its
// addresses and roles, no lease: see model.SVMPrefix), and every SDS object holds
// its data address. The peer set of an SVM is the settings' first-boot peers
// (cluster.svms, MDM members, gateways) plus every address the model holds now,
// minus the addresses the model held once and no longer does (their SVM was
// removed). This SVM's own addresses and loopback are never removed. The ruleset
// is firewall.Ruleset of that set: peersync derives nothing of its own.
//
// "Held once" is remembered on disk (KnownFile), so a removal that happened while
// this SVM was down still closes the door, and a first-boot peer whose record was
// never written (an SVM down during an upgrade) is never dropped.
package peersync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/firewall"
	"github.com/cairn-storage/cairn/appliance/internal/firstboot"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// KnownFile is where peersync remembers every address the model has held.
const KnownFile = "/var/lib/cairn/peersync/known"

// MaxPeers bounds the addresses taken from the model (a vSphere cluster has at most
// 96 hosts, each SVM two addresses): the ruleset stays well inside nft's limits
// whatever the model holds. Addresses beyond it are left out, with a warning.
const MaxPeers = 1024

// Known-addresses file, format v1: the first line is knownHeader, then one address
// (netip text) per line, sorted. At most MaxPeers*4 lines; anything else is an error
// and the file is read as empty (which only keeps more peers admitted).
const knownHeader = "#cairn-peersync known v1"

// ParseKnown reads a known-addresses file (format above).
func ParseKnown(doc []byte) ([]netip.Addr, error) {
	const maxLines = MaxPeers * 4
	if len(doc) > maxLines*48 {
		return nil, fmt.Errorf("known-addresses file is %d bytes long, at most %d accepted", len(doc), maxLines*48)
	}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	var out []netip.Addr
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if n == 1 {
			if line != knownHeader {
				return nil, fmt.Errorf("known-addresses file does not start with %q", knownHeader)
			}
			continue
		}
		if n > maxLines+1 {
			return nil, fmt.Errorf("known-addresses file has more than %d addresses", maxLines)
		}
		a, err := netip.ParseAddr(line)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("known-addresses file line %d: not an address: %q", n, contract.Clip(line))
		}
		out = append(out, a.Unmap())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("known-addresses file: %w", err)
	}
	if n == 0 {
		return nil, errors.New("known-addresses file is empty")
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}

// formatKnown writes addrs (sorted, unique) in the known-addresses format.
func formatKnown(addrs []netip.Addr) []byte {
	var b bytes.Buffer
	b.WriteString(knownHeader + "\n")
	for _, a := range addrs {
		b.WriteString(a.String() + "\n")
	}
	return b.Bytes()
}

// Self is this SVM's record: its host name, roles and the addresses its daemons
// connect from (the static ones from the settings; with DHCP, what the NIC has).
func Self(s *contract.Settings) model.SVM {
	rec := model.SVM{Name: s.Hostname}
	for _, r := range s.Roles {
		rec.Roles = append(rec.Roles, string(r))
	}
	if s.HasRole(contract.RoleTarget) {
		rec.TargetPort = max(s.TargetPortID, 1) // cairn-role's default, as the target runs
	}
	for _, n := range []struct {
		iface string
		a     contract.Address
	}{{firewall.MgmtInterface, s.Mgmt}, {firewall.DataInterface, s.Data}} {
		var addrs []netip.Addr
		switch {
		case n.a.Prefix.IsValid():
			addrs = []netip.Addr{n.a.Prefix.Addr().Unmap()}
		case n.a.DHCP:
			addrs = interfaceAddrs(n.iface)
		}
		for _, a := range addrs {
			if !slices.Contains(rec.Addresses, a.String()) {
				rec.Addresses = append(rec.Addresses, a.String())
			}
		}
	}
	return rec
}

// interfaceAddrs are the global unicast addresses of a NIC (none when it has none
// yet: the record is written again at the next start).
func interfaceAddrs(name string) []netip.Addr {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().IsGlobalUnicast() {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// peerAddr parses an address from the model: an IP (text) or host:port. Host names,
// loopback and unspecified addresses admit nobody and are skipped.
func peerAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	a = a.Unmap()
	if a.Zone() != "" || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() {
		return netip.Addr{}, false
	}
	return a, true
}

// ModelAddrs reads the addresses the model holds now (SVM records and SDS data
// addresses, one consistent revision), sorted and unique, and that revision.
// Records that do not decode are skipped and counted in bad.
func ModelAddrs(ctx context.Context, cli *clientv3.Client) (addrs []netip.Addr, rev int64, bad int, err error) {
	svms, err := cli.Get(ctx, model.SVMPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read the SVM records: %w", err)
	}
	rev = svms.Header.Revision
	sdss, err := cli.Get(ctx, model.KindPrefix(model.KindSDS), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read the SDSs: %w", err)
	}
	for _, kv := range svms.Kvs {
		var rec model.SVM
		if json.Unmarshal(kv.Value, &rec) != nil {
			bad++
			continue
		}
		for _, s := range rec.Addresses {
			if a, ok := peerAddr(s); ok {
				addrs = append(addrs, a)
			}
		}
	}
	for _, kv := range sdss.Kvs {
		var sds model.SDS
		if json.Unmarshal(kv.Value, &sds) != nil {
			bad++
			continue
		}
		if a, ok := peerAddr(sds.Address); ok {
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs), rev, bad, nil
}

// TargetPorts is the target port group of the system: the settings' ports
// (cairn.target.port_ids, or this SVM's own) and every target port an SVM record
// holds, sorted and unique. A port leaves only when it is in neither (the settings'
// ports stay: RTPG lists a removed first-boot SVM's port until that SVM's
// settings are no longer those of the others).
func TargetPorts(ctx context.Context, cli *clientv3.Client, base []uint16) ([]uint16, error) {
	r, err := cli.Get(ctx, model.SVMPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read the SVM records: %w", err)
	}
	out := slices.Clone(base)
	for _, kv := range r.Kvs {
		var rec model.SVM
		if json.Unmarshal(kv.Value, &rec) == nil && rec.TargetPort != 0 {
			out = append(out, rec.TargetPort)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 255 { // what one RTPG descriptor holds
		out = out[:255]
	}
	return out, nil
}

// Compute is the model's part of the firewall: the addresses it holds now, and the
// ones it held once (known) and no longer does.
func Compute(now, known []netip.Addr) firewall.Peers {
	p := firewall.Peers{Known: slices.Clone(now)}
	for _, a := range known {
		if _, found := slices.BinarySearchFunc(now, a, netip.Addr.Compare); !found {
			p.Removed = append(p.Removed, a)
		}
	}
	return p
}

// Runner runs a command (firstboot.ExecRunner in production).
type Runner = firstboot.Runner

// Syncer keeps one SVM's firewall in step with the model.
type Syncer struct {
	Settings *contract.Settings // the settings first boot applied (firstboot.SettingsFile)
	Self     model.SVM          // this SVM's record (Self)
	Etcd     *clientv3.Client
	Runner   Runner // runs nft
	// RulesetPath is the file nftables.service loads at boot (firewall.Path); the
	// ruleset is loaded from a file staged next to it and renamed over it once nft
	// took it. KnownPath is KnownFile.
	RulesetPath, KnownPath string
	// MinBackoff, MaxBackoff bound the wait between attempts while etcd cannot be
	// read (0: 1 s and 30 s).
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger

	last      string       // the ruleset loaded (the file's content at start)
	known     []netip.Addr // every address the model has held (KnownPath)
	lastPeers firewall.Peers
	capWarned bool
}

func (s *Syncer) defaults() {
	if s.MinBackoff == 0 {
		s.MinBackoff = time.Second
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = 30 * time.Second
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.Runner == nil {
		s.Runner = firstboot.ExecRunner{}
	}
}

// Run records this SVM in the model, then keeps the firewall current until ctx
// ends. While etcd cannot be read the loaded ruleset stays as it is; Run retries
// with backoff and logs the outage once and the recovery once.
func (s *Syncer) Run(ctx context.Context) error {
	s.defaults()
	if b, err := os.ReadFile(s.RulesetPath); err == nil {
		s.last = string(b)
	}
	if b, err := os.ReadFile(s.KnownPath); err == nil {
		if s.known, err = ParseKnown(b); err != nil {
			s.Log.Warn("the known-addresses file is unreadable; starting without it (no first-boot peer is removed until the model is read)", "file", s.KnownPath, "err", err)
		}
	}
	registered := false
	backoff := s.MinBackoff
	var down error
	for {
		err := s.session(ctx, &registered, func() {
			if down != nil {
				s.Log.Info("the system model is readable again; following it", "outage", down)
				down = nil
			}
			backoff = s.MinBackoff
		})
		if ctx.Err() != nil {
			return nil
		}
		if down == nil {
			s.Log.Warn("cannot follow the system model; the firewall stays as it is, retrying", "err", err)
		}
		down = err
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(2*backoff, s.MaxBackoff)
	}
}

// session registers this SVM (once per Run), syncs the firewall and follows the
// model's changes until the watch fails. up is called after each successful sync.
func (s *Syncer) session(ctx context.Context, registered *bool, up func()) error {
	if !*registered {
		if err := s.register(ctx); err != nil {
			return err
		}
		*registered = true
	}
	rev, err := s.Sync(ctx)
	if err != nil {
		return err
	}
	up()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	svms := s.Etcd.Watch(wctx, model.SVMPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	sdss := s.Etcd.Watch(wctx, model.KindPrefix(model.KindSDS), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		var r clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r, ok = <-svms:
		case r, ok = <-sdss:
		}
		if !ok {
			return errors.New("the watch of the model ended")
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("watch the model: %w", err)
		}
		if len(r.Events) == 0 {
			continue // progress notification
		}
		if _, err := s.Sync(ctx); err != nil {
			return err
		}
		up()
	}
}

// register writes this SVM's record unless the model already has it as it is.
func (s *Syncer) register(ctx context.Context) error {
	val, err := json.Marshal(s.Self)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	key := model.SVMKey(s.Self.Name)
	r, err := s.Etcd.Get(tctx, key)
	if err != nil {
		return fmt.Errorf("read this SVM's record %s: %w", key, err)
	}
	if len(r.Kvs) == 1 && bytes.Equal(r.Kvs[0].Value, val) {
		return nil
	}
	if _, err := s.Etcd.Put(tctx, key, string(val)); err != nil {
		return fmt.Errorf("record this SVM at %s: %w", key, err)
	}
	s.Log.Info("this SVM is recorded in the system model", "key", key, "addresses", s.Self.Addresses, "roles", s.Self.Roles)
	return nil
}

// Sync reads the model once and brings the firewall (and KnownPath) in line with
// it; it returns the revision read. A ruleset equal to the loaded one is not
// loaded again.
func (s *Syncer) Sync(ctx context.Context) (int64, error) {
	s.defaults()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	now, rev, bad, err := ModelAddrs(tctx, s.Etcd)
	cancel()
	if err != nil {
		return 0, err
	}
	if bad > 0 {
		s.Log.Debug("model records that do not decode were skipped", "count", bad)
	}
	if len(now) > MaxPeers {
		if !s.capWarned {
			s.Log.Warn("the model holds more addresses than the firewall admits; the rest are left out", "addresses", len(now), "max", MaxPeers)
			s.capWarned = true
		}
		now = now[:MaxPeers]
	}
	known := slices.Clone(s.known)
	known = append(known, now...)
	slices.SortFunc(known, netip.Addr.Compare)
	known = slices.Compact(known)
	if !slices.Equal(known, s.known) {
		if err := firstboot.WriteAtomic(s.KnownPath, formatKnown(known), 0o644, -1, -1); err != nil {
			// Not fatal: the memory only decides removals.
			s.Log.Warn("cannot save the known addresses", "file", s.KnownPath, "err", err)
		} else {
			s.known = known
		}
	}
	peers := Compute(now, known)
	rs := firewall.Ruleset(s.Settings, peers)
	if rs == s.last {
		s.lastPeers = peers
		return rev, nil
	}
	if err := s.load(ctx, rs); err != nil {
		return 0, err
	}
	joined, left := diff(s.lastPeers.Known, peers.Known)
	s.Log.Info("firewall updated from the system model", "joined", joined, "left", left, "removed_from_settings", peers.Removed, "model_peers", len(peers.Known), "revision", rev)
	s.last, s.lastPeers = rs, peers
	return rev, nil
}

// load loads rs with nft -f (one transaction: the ruleset starts with flush
// ruleset) from a file staged next to RulesetPath, then renames it over
// RulesetPath so that a reboot loads the same. Nothing changes when nft refuses it.
func (s *Syncer) load(ctx context.Context, rs string) error {
	stage := filepath.Join(filepath.Dir(s.RulesetPath), "."+filepath.Base(s.RulesetPath)+".peersync")
	if err := firstboot.WriteAtomic(stage, []byte(rs), 0o755, -1, -1); err != nil {
		return fmt.Errorf("stage the ruleset: %w", err)
	}
	if _, err := s.Runner.Run(ctx, "nft", "-f", stage); err != nil {
		os.Remove(stage)
		return fmt.Errorf("load the ruleset (the previous one stays): %w; report this as a bug", err)
	}
	if err := os.Rename(stage, s.RulesetPath); err != nil {
		return fmt.Errorf("loaded, but %s not updated (a reboot loads the previous ruleset): %w", s.RulesetPath, err)
	}
	return nil
}

// diff returns what is in b and not in a, and what is in a and not in b.
func diff(a, b []netip.Addr) (added, removed []string) {
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x.String())
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x.String())
		}
	}
	return added, removed
}

// LoadSettings reads the settings first boot applied (firstboot.SettingsFile).
func LoadSettings(path string) (*contract.Settings, error) {
	seed, err := firstboot.ReadSeed(path)
	if err != nil {
		return nil, fmt.Errorf("%w (first boot writes it; an SVM deployed before peer sync has none: run 'cairn firstboot --force' with its settings, or redeploy it)", err)
	}
	s, err := contract.Validate(seed.Settings)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

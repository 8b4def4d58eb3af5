// Package placement owns the mapping of data to devices: which placement
// group a chunk belongs to, and which devices hold each group's copies. It
// is pure logic with no I/O.
//
// Copies are chosen by weighted rendezvous hashing: every (group, device)
// pair gets a score that grows with the device's capacity, and a group's
// copies are the best-scoring devices on distinct SDSs in distinct fault
// domains. Adding or removing a device changes only the groups where that
// device wins or loses, so few groups move, and the load spreads in
// proportion to capacity without any stored state beyond the map itself.
package placement

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Copies is the number of copies of every chunk.
const Copies = 2

// ErrNotEnoughFaultDomains: the devices do not span enough fault domains.
var ErrNotEnoughFaultDomains = errors.New("not enough fault domains for two copies")

// PG returns the placement group of a chunk of a volume.
func PG(volume uint64, chunk uint64, pgCount int) int {
	return int(mix(volume^mix(chunk+0x9e3779b97f4a7c15)) % uint64(pgCount))
}

// mix is splitmix64's finaliser: a cheap, well-spread 64-bit hash.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hashString(s string) uint64 {
	// FNV-1a then mixed: stable across releases (part of the placement).
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix(h)
}

// Candidate is a device that may hold copies.
type Candidate struct {
	DeviceID    string
	SDSID       string
	FaultDomain string // fault set id, or the SDS id when it has none
	Weight      float64
}

// Candidates builds the candidate list of a pool from the model: devices of
// the pool in state normal on SDSs in state normal, weighted by capacity.
func Candidates(poolID string, devices []model.Device, sdss []model.SDS, usable func(sds model.SDS) bool) []Candidate {
	byID := map[string]model.SDS{}
	for _, s := range sdss {
		byID[s.ID] = s
	}
	var out []Candidate
	for _, d := range devices {
		s, ok := byID[d.SDSID]
		if d.PoolID != poolID || d.State != model.DeviceNormal || !ok || d.Capacity <= 0 {
			continue
		}
		if usable != nil && !usable(s) {
			continue
		}
		fd := s.FaultSetID
		if fd == "" {
			fd = "sds:" + s.ID
		}
		out = append(out, Candidate{DeviceID: d.ID, SDSID: s.ID, FaultDomain: fd, Weight: float64(d.Capacity) / (1 << 30)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceID < out[j].DeviceID })
	return out
}

// FaultDomains counts the distinct fault domains among candidates.
func FaultDomains(cs []Candidate) int {
	m := map[string]bool{}
	for _, c := range cs {
		m[c.FaultDomain] = true
	}
	return len(m)
}

// score is the weighted rendezvous score of device d for group pg:
// -w / ln(u), u uniform in (0,1) from the hash. Higher wins.
func score(pg int, c Candidate) float64 {
	h := mix(hashString(c.DeviceID) ^ mix(uint64(pg)+1))
	u := (float64(h>>11) + 0.5) / (1 << 53)
	return -c.Weight / math.Log(u)
}

// Choose returns the ordered copy set of one group: the best-scoring
// devices on distinct SDSs and fault domains.
func Choose(pg int, cs []Candidate) []model.CopyRef {
	type sc struct {
		s float64
		c Candidate
	}
	all := make([]sc, len(cs))
	for i, c := range cs {
		all[i] = sc{score(pg, c), c}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].s != all[j].s {
			return all[i].s > all[j].s
		}
		return all[i].c.DeviceID < all[j].c.DeviceID
	})
	var out []model.CopyRef
	usedSDS, usedFD := map[string]bool{}, map[string]bool{}
	for _, x := range all {
		if usedSDS[x.c.SDSID] || usedFD[x.c.FaultDomain] {
			continue
		}
		usedSDS[x.c.SDSID], usedFD[x.c.FaultDomain] = true, true
		out = append(out, model.CopyRef{SDSID: x.c.SDSID, DeviceID: x.c.DeviceID, State: model.CopyReady})
		if len(out) == Copies {
			break
		}
	}
	return out
}

// Compute returns the full map of a pool for the candidates.
func Compute(poolID string, pgCount int, epoch uint64, cs []Candidate) (*model.PlacementMap, error) {
	if n := FaultDomains(cs); n < Copies {
		return nil, fmt.Errorf("pool %s: devices span %d fault domain(s): %w; add devices on another SDS (or fault set)", poolID, n, ErrNotEnoughFaultDomains)
	}
	m := &model.PlacementMap{PoolID: poolID, Epoch: epoch, PGCount: pgCount, PGs: make([][]model.CopyRef, pgCount)}
	for pg := 0; pg < pgCount; pg++ {
		m.PGs[pg] = Choose(pg, cs)
	}
	return m, nil
}

package testcluster

// This file holds the pool-health checks the rebuild and drain tests wait
// on (client and sds tests share them).

import (
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Healthy reports whether every placement group of the pool has two ready
// copies, none on the SDS with id exclude ("" excludes none).
func (c *Cluster) Healthy(exclude string) bool {
	m, ok := c.Cat.Map(c.PoolID)
	if !ok {
		return false
	}
	for _, pg := range m.PGs {
		if !groupHealthy(pg, exclude) {
			return false
		}
	}
	return true
}

func groupHealthy(pg []model.CopyRef, exclude string) bool {
	if len(pg) != 2 {
		return false
	}
	for _, cp := range pg {
		if cp.State != model.CopyReady || cp.SDSID == exclude {
			return false
		}
	}
	return true
}

// WaitHealthy waits until Healthy(exclude) and returns how long that took;
// after within it logs the groups that are not and fails the test.
func (c *Cluster) WaitHealthy(exclude string, within time.Duration) time.Duration {
	c.T.Helper()
	start := time.Now()
	for !c.Healthy(exclude) {
		if time.Since(start) > within {
			m, _ := c.Cat.Map(c.PoolID)
			for i, pg := range m.PGs {
				if !groupHealthy(pg, exclude) {
					c.T.Logf("pg %d: %+v", i, pg)
				}
			}
			c.T.Fatalf("pool not healthy after %s (epoch %d)", within, m.Epoch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

package catalog

import clientv3 "go.etcd.io/etcd/client/v3"

// Client returns the etcd client the catalog watches through (frontends
// publish their statistics with it).
func (c *Catalog) Client() *clientv3.Client { return c.cli }

package catalog

import clientv3 "go.etcd.io/etcd/client/v3"

// Install is install, for the external tests.
func (c *Catalog) Install(r *clientv3.GetResponse) { c.install(r) }

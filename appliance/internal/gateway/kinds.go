// The object kinds the REST API serves (protection domains, fault sets, SDSs,
// devices, pools, volumes, hosts, users): path, roles, filters and the model
// calls behind list/get/create/update/delete of each.

package gateway

import (
	"context"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// filter is one ?param= of a list route: values returns the strings an
// object matches (its id and name for a reference); ref is the kind a
// reference filter names (checked to exist), "" for plain values.
type filter struct {
	param  string
	ref    string
	values func(w *world, id string) []string
}

// kindAPI serves list/get/create/update/delete of one kind of object.
type kindAPI struct {
	kind        string
	path        string // under APIPrefix, e.g. /volumes
	read, write string // least roles
	// ids returns the ids of all objects, sorted by name.
	ids func(w *world) []string
	// view returns the view of one object by id.
	view    func(w *world, id string) (any, bool)
	filters []filter
	// create returns the new object's id, or an existing identical one's
	// with created false (an idempotent repeat).
	create func(c *call) (id string, created bool, err error)
	// createJob, when set, answers POST instead of create: the kind is
	// created by a job (devices).
	createJob func(c *call) (int, any, error)
	update    func(c *call) (id string, err error)
	del       func(ctx context.Context, ref string) error
}

// nameFilter, refFilter and stateFilter build the common filters.
func nameFilter(name func(w *world, id string) string) filter {
	return filter{param: "name", values: func(w *world, id string) []string { return []string{name(w, id)} }}
}

func refFilter(param, kind string, refs func(w *world, id string) []string) filter {
	return filter{param: param, ref: kind, values: refs}
}

func (s *Server) kinds() []kindAPI {
	const A, O, M = model.RoleAdmin, model.RoleOperator, model.RoleMonitor
	st := s.store
	pdOf := func(w *world, pdID string) []string { return []string{pdID, w.pds[pdID].Name} }
	return []kindAPI{
		{kind: model.KindPD, path: "/protection-domains", read: M, write: A,
			ids: func(w *world) []string {
				return idsByName(w.pds, func(v model.ProtectionDomain) string { return v.Name })
			},
			view:    func(w *world, id string) (any, bool) { v, ok := w.pds[id]; return w.pdView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.pds[id].Name })},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.PDSpec) (model.ProtectionDomain, error) { return st.CreatePD(c.ctx, spec) },
					func(v model.ProtectionDomain) string { return v.ID },
					func(w *world, spec model.PDSpec) string { return w.byName(model.KindPD, spec.Name) })
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.NameUpdate) (model.ProtectionDomain, error) { return st.UpdatePD(c.ctx, c.ref(), up) },
					func(v model.ProtectionDomain) string { return v.ID })
			},
			del: st.DeletePD},
		{kind: model.KindFaultSet, path: "/fault-sets", read: M, write: A,
			ids: func(w *world) []string {
				return idsByName(w.faultSets, func(v model.FaultSet) string { return v.Name })
			},
			view: func(w *world, id string) (any, bool) { v, ok := w.faultSets[id]; return w.faultSetView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.faultSets[id].Name }),
				refFilter("protection_domain", model.KindPD, func(w *world, id string) []string { return pdOf(w, w.faultSets[id].PDID) })},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.FaultSetSpec) (model.FaultSet, error) { return st.CreateFaultSet(c.ctx, spec) },
					func(v model.FaultSet) string { return v.ID },
					func(w *world, spec model.FaultSetSpec) string {
						id := w.byName(model.KindFaultSet, spec.Name)
						if w.faultSets[id].PDID != w.resolve(model.KindPD, spec.PD) {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.NameUpdate) (model.FaultSet, error) { return st.UpdateFaultSet(c.ctx, c.ref(), up) },
					func(v model.FaultSet) string { return v.ID })
			},
			del: st.DeleteFaultSet},
		{kind: model.KindSDS, path: "/sds", read: M, write: A,
			ids:  func(w *world) []string { return idsByName(w.sdss, func(v model.SDS) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.sdss[id]; return w.sdsView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.sdss[id].Name }),
				refFilter("protection_domain", model.KindPD, func(w *world, id string) []string { return pdOf(w, w.sdss[id].PDID) }),
				refFilter("fault_set", model.KindFaultSet, func(w *world, id string) []string {
					f := w.sdss[id].FaultSetID
					return []string{f, w.faultSets[f].Name}
				}),
				{param: "state", values: func(w *world, id string) []string { return []string{w.sdss[id].State} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.SDSSpec) (model.SDS, error) { return st.CreateSDS(c.ctx, spec) },
					func(v model.SDS) string { return v.ID },
					func(w *world, spec model.SDSSpec) string {
						id := w.byName(model.KindSDS, spec.Name)
						x := w.sdss[id]
						if x.PDID != w.resolve(model.KindPD, spec.PD) || x.Address != spec.Address ||
							(spec.FaultSet != "" && x.FaultSetID != w.resolve(model.KindFaultSet, spec.FaultSet)) || (spec.FaultSet == "" && x.FaultSetID != "") {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.SDSUpdate) (model.SDS, error) { return st.UpdateSDS(c.ctx, c.ref(), up) },
					func(v model.SDS) string { return v.ID })
			},
			del: st.DeleteSDS},
		{kind: model.KindDevice, path: "/devices", read: M, write: A,
			ids:  func(w *world) []string { return idsByName(w.devices, func(v model.Device) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.devices[id]; return w.deviceView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.devices[id].Name }),
				refFilter("sds", model.KindSDS, func(w *world, id string) []string {
					x := w.devices[id].SDSID
					return []string{x, w.sdss[x].Name}
				}),
				refFilter("pool", model.KindPool, func(w *world, id string) []string {
					p := w.devices[id].PoolID
					return []string{p, w.pools[p].Name}
				}),
				{param: "state", values: func(w *world, id string) []string { return []string{w.devices[id].State} }}},
			createJob: s.addDevice,
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.NameUpdate) (model.Device, error) { return st.UpdateDevice(c.ctx, c.ref(), up) },
					func(v model.Device) string { return v.ID })
			},
			del: st.DeleteDevice},
		{kind: model.KindPool, path: "/pools", read: M, write: A,
			ids:  func(w *world) []string { return idsByName(w.pools, func(v model.StoragePool) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.pools[id]; return w.poolView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.pools[id].Name }),
				refFilter("protection_domain", model.KindPD, func(w *world, id string) []string { return pdOf(w, w.pools[id].PDID) })},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.PoolSpec) (model.StoragePool, error) { return st.CreatePool(c.ctx, spec) },
					func(v model.StoragePool) string { return v.ID },
					func(w *world, spec model.PoolSpec) string {
						id := w.byName(model.KindPool, spec.Name)
						p := w.pools[id]
						if p.PDID != w.resolve(model.KindPD, spec.PD) || (spec.SparePercent != nil && *spec.SparePercent != p.SparePercent) ||
							(spec.PGCount != 0 && spec.PGCount != p.PGCount) {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.PoolUpdate) (model.StoragePool, error) { return st.UpdatePool(c.ctx, c.ref(), up) },
					func(v model.StoragePool) string { return v.ID })
			},
			del: st.DeletePool},
		{kind: model.KindVolume, path: "/volumes", read: M, write: O,
			ids:  func(w *world) []string { return idsByName(w.volumes, func(v model.Volume) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.volumes[id]; return w.volumeView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.volumes[id].Name }),
				refFilter("pool", model.KindPool, func(w *world, id string) []string {
					p := w.volumes[id].PoolID
					return []string{p, w.pools[p].Name}
				}),
				refFilter("host", model.KindHost, func(w *world, id string) []string {
					var out []string
					for _, m := range w.volumes[id].Mappings {
						out = append(out, m.HostID, w.hosts[m.HostID].Name)
					}
					return out
				})},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.VolumeSpec) (model.Volume, error) { return st.CreateVolume(c.ctx, spec) },
					func(v model.Volume) string { return v.ID },
					func(w *world, spec model.VolumeSpec) string {
						id := w.byName(model.KindVolume, spec.Name)
						v := w.volumes[id]
						thin := spec.Thin == nil || *spec.Thin
						if v.PoolID != w.resolve(model.KindPool, spec.Pool) || v.Size != spec.Size || v.Thin != thin {
							return ""
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.VolumeUpdate) (model.Volume, error) { return st.UpdateVolume(c.ctx, c.ref(), up) },
					func(v model.Volume) string { return v.ID })
			},
			del: st.DeleteVolume},
		{kind: model.KindHost, path: "/hosts", read: M, write: O,
			ids:  func(w *world) []string { return idsByName(w.hosts, func(v model.Host) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.hosts[id]; return w.hostView(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return w.hosts[id].Name }),
				{param: "type", values: func(w *world, id string) []string { return []string{w.hosts[id].Type} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.HostSpec) (model.Host, error) { return st.CreateHost(c.ctx, spec) },
					func(v model.Host) string { return v.ID },
					func(w *world, spec model.HostSpec) string {
						id := w.byName(model.KindHost, spec.Name)
						h := w.hosts[id]
						iqn := spec.IQN
						if n, err := model.NormalizeIQN(spec.IQN); err == nil {
							iqn = n
						}
						if h.Type != spec.Type || h.IQN != iqn || h.CHAPUser != spec.CHAPUser || h.CHAP != (spec.CHAPSecret != "") {
							return ""
						}
						if h.CHAP {
							// The secret is outside the model: compare it
							// with the stored one (a repeat sends the same).
							if sec, err := st.HostCHAPSecret(c.ctx, id); err != nil || sec != spec.CHAPSecret {
								return ""
							}
						}
						return id
					})
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.HostUpdate) (model.Host, error) { return st.UpdateHost(c.ctx, c.ref(), up) },
					func(v model.Host) string { return v.ID })
			},
			del: st.DeleteHost},
		// Users are admin-only, reads included: the list of accounts and
		// their roles is security-relevant. A repeated create is always
		// already_exists: the password cannot be compared.
		{kind: model.KindUser, path: "/users", read: A, write: A,
			ids:  func(w *world) []string { return idsByName(w.users, func(v model.User) string { return v.Name }) },
			view: func(w *world, id string) (any, bool) { v, ok := w.users[id]; return userViewOf(v), ok },
			filters: []filter{nameFilter(func(w *world, id string) string { return id }),
				{param: "role", values: func(w *world, id string) []string { return []string{w.users[id].Role} }}},
			create: func(c *call) (string, bool, error) {
				return createWith(c, func(spec model.UserSpec) (model.User, error) { return st.CreateUser(c.ctx, spec) },
					func(v model.User) string { return v.Name }, nil)
			},
			update: func(c *call) (string, error) {
				return updateWith(c, func(up model.UserUpdate) (model.User, error) { return st.UpdateUser(c.ctx, c.ref(), up) },
					func(v model.User) string { return v.Name })
			},
			del: st.DeleteUser},
	}
}

package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// SVM records (model.SVMKey; internal/peersync keeps every SVM's firewall and
// target port group in step with them). An SVM writes its own at start, but a
// new SVM cannot reach etcd until the others admit it: the deployer writes the
// record ahead of the SVM's first boot (PUT /svms/{name}) and deletes it when the
// SVM is removed (DELETE /svms/{name}).

// maxSVMAddresses bounds one record (management and data, v4 and v6).
const maxSVMAddresses = 8

func (s *Server) listSVMs(c *call) (int, any, error) {
	r, err := s.cfg.Etcd.Get(c.ctx, model.SVMPrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, nil, etcdErr("read the SVM records", err)
	}
	out := []model.SVM{}
	for _, kv := range r.Kvs {
		var rec model.SVM
		if json.Unmarshal(kv.Value, &rec) == nil {
			out = append(out, rec)
		}
	}
	return http.StatusOK, out, nil
}

// getSVM answers one record; 404 when the SVM has none (not yet recorded, or
// removed).
func (s *Server) getSVM(c *call) (int, any, error) {
	name := c.r.PathValue("name")
	if err := model.ValidateName(model.KindUser, name); err != nil {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "SVM name %q: use its host name", name), "name")
	}
	r, err := s.cfg.Etcd.Get(c.ctx, model.SVMKey(name))
	if err != nil {
		return 0, nil, etcdErr("read the SVM record", err)
	}
	var rec model.SVM
	if len(r.Kvs) == 0 || json.Unmarshal(r.Kvs[0].Value, &rec) != nil {
		return 0, nil, model.WithField(errorf(http.StatusNotFound, "SVM %q has no record; list them with `cairnctl svm ls`, write one with `cairnctl svm record`", name), "name")
	}
	return http.StatusOK, rec, nil
}

// putSVM writes the record named in the path; a repeat with the same content
// changes nothing.
func (s *Server) putSVM(c *call) (int, any, error) {
	name := c.r.PathValue("name")
	if err := model.ValidateName(model.KindUser, name); err != nil {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "SVM name %q: use its host name, 1-64 characters from A-Z a-z 0-9 . _ -", name), "name")
	}
	var req model.SVM
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if req.Name != "" && req.Name != name {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "name %q differs from the path's %q; leave it out or give the same", req.Name, name), "name")
	}
	rec := model.SVM{Name: name, TargetPort: req.TargetPort}
	if len(req.Addresses) == 0 || len(req.Addresses) > maxSVMAddresses {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "give 1-%d addresses: the SVM's management and data addresses", maxSVMAddresses), "addresses")
	}
	for _, a := range req.Addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" || !ip.Unmap().IsGlobalUnicast() {
			return 0, nil, model.WithField(errorf(http.StatusBadRequest, "address %q is not a unicast IP address", contract.Clip(a)), "addresses")
		}
		if t := ip.Unmap().String(); !slices.Contains(rec.Addresses, t) {
			rec.Addresses = append(rec.Addresses, t)
		}
	}
	for _, r := range req.Roles {
		if !slices.Contains(contract.AllRoles, contract.Role(r)) || slices.Contains(rec.Roles, r) {
			return 0, nil, model.WithField(errorf(http.StatusBadRequest, "role %q: give each of mdm, tiebreaker, sds, target, gateway at most once", contract.Clip(r)), "roles")
		}
		rec.Roles = append(rec.Roles, r)
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return 0, nil, err
	}
	if _, err := s.cfg.Etcd.Put(c.ctx, model.SVMKey(name), string(val)); err != nil {
		return 0, nil, etcdErr(fmt.Sprintf("record SVM %s", name), err)
	}
	c.object = &objectRef{Kind: "svm", ID: name, Name: name}
	return http.StatusOK, rec, nil
}

// deleteSVM removes the record, and with it the SVM's upgrade order and
// state (an SVM that is gone is no longer listed by GET /upgrade/svms);
// removing one that does not exist changes nothing (a host removal that
// resumes).
func (s *Server) deleteSVM(c *call) (int, any, error) {
	name := c.r.PathValue("name")
	if err := model.ValidateName(model.KindUser, name); err != nil {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "SVM name %q: use its host name", name), "name")
	}
	if _, err := s.cfg.Etcd.Txn(c.ctx).Then(clientv3.OpDelete(model.SVMKey(name)),
		clientv3.OpDelete(model.UpgradeOrderPrefix+name), clientv3.OpDelete(model.UpgradeStatePrefix+name)).Commit(); err != nil {
		return 0, nil, etcdErr(fmt.Sprintf("delete the record of SVM %s", name), err)
	}
	c.object = &objectRef{Kind: "svm", ID: name, Name: name}
	return http.StatusNoContent, nil, nil
}

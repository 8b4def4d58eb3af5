package vcsimkit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Path selection and storage array type plug-ins, as ESXi names them.
const (
	PSPMostRecentlyUsed = "VMW_PSP_MRU"
	PSPRoundRobin       = "VMW_PSP_RR"
	PSPFixed            = "VMW_PSP_FIXED"
	SATPALUA            = "VMW_SATP_ALUA"
)

// pathSelectionPolicies are the PSPs an ESXi host accepts in
// SetMultipathLunPolicy (QueryPathSelectionPolicyOptions on a stock host).
var pathSelectionPolicies = map[string]bool{PSPMostRecentlyUsed: true, PSPRoundRobin: true, PSPFixed: true}

// multipathLUN builds the multipath view of an iSCSI LUN as ESXi shows it
// for a TPGS device: claimed by VMW_SATP_ALUA, whose default PSP is MRU
// (one working path), one path per send target (every SVM exports every
// volume). policy is kept from an earlier rescan, as ESXi keeps it.
func multipathLUN(disk *types.HostScsiDisk, lunNumber int, targets []string, policy string) types.HostMultipathInfoLogicalUnit {
	if policy == "" {
		policy = PSPMostRecentlyUsed
	}
	lu := types.HostMultipathInfoLogicalUnit{
		Key: "key-vim.host.MultipathInfo.LogicalUnit-" + disk.Uuid, Id: disk.Uuid, Lun: disk.Key,
		Policy:                 &types.HostMultipathInfoLogicalUnitPolicy{Policy: policy},
		StorageArrayTypePolicy: &types.HostMultipathInfoLogicalUnitStorageArrayTypePolicy{Policy: SATPALUA},
	}
	for i, t := range targets {
		name := fmt.Sprintf("%s:C0:T%d:L%d", SoftwareISCSIDevice, i, lunNumber)
		lu.Path = append(lu.Path, types.HostMultipathInfoPath{
			Key: "key-vim.host.MultipathInfo.Path-" + name, Name: name, PathState: "active", State: "active",
			IsWorkingPath: types.NewBool(policy == PSPRoundRobin || i == 0),
			Adapter:       "key-vim.host.InternetScsiHba-" + SoftwareISCSIDevice, Lun: lu.Key,
			Transport: &types.HostInternetScsiTargetTransport{IScsiName: "iqn.2026-01.io.cairn:" + strings.ReplaceAll(t, ":", "-"),
				Address: []string{t}},
		})
	}
	return lu
}

// setMultipath replaces the multipath entries of the iSCSI LUNs with
// luns, keeping each LU's policy. Called with s.mu held.
func (s *storageSystem) setMultipath(luns []*types.HostScsiDisk, targets []string) {
	info := s.StorageDeviceInfo
	if info.MultipathInfo == nil {
		info.MultipathInfo = &types.HostMultipathInfo{}
	}
	old := map[string]string{}
	var keep []types.HostMultipathInfoLogicalUnit
	for _, lu := range info.MultipathInfo.Lun {
		if strings.HasPrefix(lu.Key, "key-vim.host.MultipathInfo.LogicalUnit-") && lu.StorageArrayTypePolicy != nil && lu.StorageArrayTypePolicy.Policy == SATPALUA {
			old[lu.Id] = lu.Policy.GetHostMultipathInfoLogicalUnitPolicy().Policy
			continue
		}
		keep = append(keep, lu)
	}
	sorted := append([]string(nil), targets...)
	sort.Strings(sorted)
	for i, d := range luns {
		keep = append(keep, multipathLUN(d, i, sorted, old[d.Uuid]))
	}
	info.MultipathInfo.Lun = keep
}

// SetMultipathLunPolicy sets a LU's path selection policy. Like ESXi it
// refuses an id that names no LU and a policy no PSP plug-in provides.
func (s *storageSystem) SetMultipathLunPolicy(ctx *simulator.Context, req *types.SetMultipathLunPolicy) soap.HasFault {
	body := &methods.SetMultipathLunPolicyBody{}
	policy := req.Policy.GetHostMultipathInfoLogicalUnitPolicy().Policy
	if !pathSelectionPolicies[policy] {
		body.Fault_ = simulator.Fault("no path selection plug-in "+policy+" on this host (use one of QueryPathSelectionPolicyOptions)", &types.InvalidArgument{InvalidProperty: "policy"})
		return body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if mp := s.StorageDeviceInfo.MultipathInfo; mp != nil {
		for i := range mp.Lun {
			if mp.Lun[i].Id != req.LunId {
				continue
			}
			mp.Lun[i].Policy = &types.HostMultipathInfoLogicalUnitPolicy{Policy: policy}
			for j := range mp.Lun[i].Path {
				mp.Lun[i].Path[j].IsWorkingPath = types.NewBool(policy == PSPRoundRobin || j == 0)
			}
			s.publish(ctx)
			body.Res = &types.SetMultipathLunPolicyResponse{}
			return body
		}
	}
	body.Fault_ = simulator.Fault("no logical unit "+req.LunId+" on this host: rescan the storage adapters", &types.NotFound{})
	return body
}

// QueryPathSelectionPolicyOptions lists the PSPs SetMultipathLunPolicy accepts.
func (s *storageSystem) QueryPathSelectionPolicyOptions(ctx *simulator.Context, req *types.QueryPathSelectionPolicyOptions) soap.HasFault {
	var out []types.HostPathSelectionPolicyOption
	for _, p := range []string{PSPFixed, PSPMostRecentlyUsed, PSPRoundRobin} {
		out = append(out, types.HostPathSelectionPolicyOption{Policy: &types.ElementDescription{Key: p, Description: types.Description{Label: p, Summary: p}}})
	}
	return &methods.QueryPathSelectionPolicyOptionsBody{Res: &types.QueryPathSelectionPolicyOptionsResponse{Returnval: out}}
}

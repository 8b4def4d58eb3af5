package model

import (
	"context"
	"regexp"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// iSCSI names (RFC 3720 §3.2.6.3, naa. from RFC 3980). iqn. names are
// case-insensitive and stored lower-cased; eui./naa. hex is stored
// upper-cased. At most 223 bytes.
var (
	iqnRe = regexp.MustCompile(`^iqn\.[0-9]{4}-(0[1-9]|1[0-2])\.[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[a-z0-9.:_-]*)?$`)
	euiRe = regexp.MustCompile(`^eui\.[0-9A-F]{16}$`)
	naaRe = regexp.MustCompile(`^naa\.([0-9A-F]{16}|[0-9A-F]{32})$`)
)

// NormalizeIQN validates an iSCSI initiator name and returns its canonical
// form.
func NormalizeIQN(name string) (string, error) {
	const help = "; use iqn.YYYY-MM.reversed.domain[:id] (e.g. iqn.1998-01.com.vmware:esx01-4c1d2f0a), eui. + 16 hex digits, or naa. + 16/32 hex digits (RFC 3720)"
	if len(name) > 223 {
		return "", invalidf("iSCSI name is %d bytes; at most 223 are allowed%s", len(name), help)
	}
	lower := strings.ToLower(name)
	switch {
	case strings.HasPrefix(lower, "iqn."):
		if iqnRe.MatchString(lower) {
			return lower, nil
		}
	case strings.HasPrefix(lower, "eui."), strings.HasPrefix(lower, "naa."):
		canon := lower[:4] + strings.ToUpper(name[4:])
		if euiRe.MatchString(canon) || naaRe.MatchString(canon) {
			return canon, nil
		}
	}
	return "", invalidf("%q is not a valid iSCSI name%s", name, help)
}

// HostSpec is the request to create a host.
type HostSpec struct {
	Name       string `json:"name"`
	Type       string `json:"type"`          // "iscsi" or "nbd"
	IQN        string `json:"iqn,omitempty"` // required for iscsi
	CHAPUser   string `json:"chap_user,omitempty"`
	CHAPSecret string `json:"chap_secret,omitempty"`
}

func (s *Store) CreateHost(ctx context.Context, spec HostSpec) (Host, error) {
	if err := ValidateName(KindHost, spec.Name); err != nil {
		return Host{}, err
	}
	h := Host{ID: NewID(), Name: spec.Name, Type: spec.Type}
	switch spec.Type {
	case HostISCSI:
		if spec.IQN == "" {
			return Host{}, invalidf("iSCSI host %q: give its initiator name (iqn), e.g. from `esxcli iscsi adapter get -A vmhba64`", spec.Name)
		}
		iqn, err := NormalizeIQN(spec.IQN)
		if err != nil {
			return Host{}, WithField(err, "iqn")
		}
		h.IQN = iqn
		if err := checkCHAP(spec.Name, spec.CHAPUser, spec.CHAPSecret); err != nil {
			return Host{}, err
		}
		h.CHAPUser, h.CHAPSecret, h.CHAP = spec.CHAPUser, spec.CHAPSecret, spec.CHAPSecret != ""
	case HostNBD:
		if spec.IQN != "" || spec.CHAPUser != "" || spec.CHAPSecret != "" {
			return Host{}, invalidf("NBD host %q: iqn and CHAP apply to iSCSI hosts only; drop them or use type iscsi", spec.Name)
		}
	case "":
		return Host{}, invalidf("host %q: give its type: %q (ESXi, iSCSI initiators) or %q (Linux NBD clients)", spec.Name, HostISCSI, HostNBD)
	default:
		return Host{}, invalidf("host %q: type %q is unknown; use %q or %q", spec.Name, spec.Type, HostISCSI, HostNBD)
	}
	var cmps []clientv3.Cmp
	if h.IQN != "" {
		hosts, r, err := listAt[Host](ctx, s, KindHost)
		if err != nil {
			return Host{}, err
		}
		for _, o := range hosts {
			if o.IQN == h.IQN {
				return Host{}, existsf("host %q already has initiator name %s; one host per initiator", o.Name, h.IQN)
			}
		}
		cmps = append(cmps, unchangedSince(KindHost, r))
	}
	return h, s.create(ctx, KindHost, h.ID, h.Name, h, cmps, chapSecretOps(h)...)
}

func (s *Store) GetHost(ctx context.Context, ref string) (Host, error) {
	h, _, err := fetch[Host](ctx, s, KindHost, ref)
	return h, err
}

// DeleteHost refuses while volumes are mapped to the host.
func (s *Store) DeleteHost(ctx context.Context, ref string) error {
	h, rev, err := fetch[Host](ctx, s, KindHost, ref)
	if err != nil {
		return err
	}
	vols, r, err := listAt[Volume](ctx, s, KindVolume)
	if err != nil {
		return err
	}
	var vn []string
	for _, v := range vols {
		for _, m := range v.Mappings {
			if m.HostID == h.ID {
				vn = append(vn, v.Name)
			}
		}
	}
	if len(vn) > 0 {
		return inUsef("host %q still has %s mapped (%s); unmap them first", h.Name, plural(len(vn), "volume"), nameList(vn))
	}
	return s.deleteObj(ctx, KindHost, h.ID, h.Name, rev, []clientv3.Cmp{unchangedSince(KindVolume, r)}, clientv3.OpDelete(CHAPSecretKey(h.ID)))
}

package contract

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on raw input. They keep a hostile or broken source from costing memory or
// time; real settings are far below them.
const (
	MaxValueLen    = 8192 // an ssh-rsa 16384-bit key is ~2.8 KB
	MaxSettings    = 64   // properties in one source, known or not
	maxDNSServers  = 3    // resolv.conf honours three
	maxNTPServers  = 4
	maxMDMMembers  = 7 // etcd clusters larger than 7 only slow writes down
	maxGateways    = 16
	maxPorts       = 256
	maxSVMAddrs    = 256 // 128 SVMs with a management and a data address each
	maxSSHNets     = 16
	maxDataClients = 32
)

// Role is one Cairn service an SVM runs.
type Role string

// The roles. tiebreaker is an MDM member that votes but runs no control loop.
const (
	RoleMDM        Role = "mdm"
	RoleTiebreaker Role = "tiebreaker"
	RoleSDS        Role = "sds"
	RoleTarget     Role = "target"
	RoleGateway    Role = "gateway"
)

var allRoles = []Role{RoleMDM, RoleTiebreaker, RoleSDS, RoleTarget, RoleGateway}

// Address is a network interface setting: DHCP, or a static address with its prefix.
type Address struct {
	DHCP   bool
	Prefix netip.Prefix // valid only when !DHCP; Addr() is the interface address
}

// IsSet reports whether the interface is to be configured at all.
func (a Address) IsSet() bool { return a.DHCP || a.Prefix.IsValid() }

func (a Address) String() string {
	switch {
	case a.DHCP:
		return "dhcp"
	case a.Prefix.IsValid():
		return a.Prefix.String()
	}
	return ""
}

// Settings is a validated first-boot configuration. Every field has passed the checks in
// Validate, so renderers may put them into config files without further quoting.
type Settings struct {
	Hostname    string
	Mgmt        Address
	Gateway     netip.Addr // zero when unset (DHCP provides it)
	Data        Address    // !IsSet(): data traffic uses the management network
	DNS         []netip.Addr
	NTP         []string
	Roles       []Role
	ClusterName string
	JoinToken   string // one-time bootstrap token, or empty
	MDMMembers  []Member
	Gateways    []netip.Addr
	// SVMs are the management and data addresses of every SVM of the system (empty:
	// not given; the firewall then opens the cluster ports to whole networks).
	SVMs []netip.Addr
	// DataClients are the machines outside the SVMs that run data clients (cairn
	// nbd): they reach etcd and the SDS data port.
	DataClients []netip.Prefix
	// TargetPortID is this SVM's relative target port (0: not given); TargetPorts
	// every target SVM's, this one's included (empty: this one only).
	TargetPortID uint16
	TargetPorts  []uint16
	SSHKey       string // one OpenSSH public key line, or empty
	// SSHAllowFrom are the networks that may connect to SSH (empty: the management
	// network adapter).
	SSHAllowFrom []netip.Prefix
}

// Member is one MDM member: its etcd name (the SVM's host name) and management address.
type Member struct {
	Name string
	Addr netip.Addr
}

// ClientURL is where daemons reach the member's etcd.
func (m Member) ClientURL() string { return "https://" + hostPort(m.Addr, MDMClientPort) }

// PeerURL is where the other members reach it.
func (m Member) PeerURL() string { return "https://" + hostPort(m.Addr, MDMPeerPort) }

// JoinURL is its join service's (every member keeps the CA and serves joins).
func (m Member) JoinURL() string { return "https://" + hostPort(m.Addr, JoinPort) }

// Keeper reports whether this SVM keeps a copy of the cluster CA and serves
// joins (JoinURL): every MDM member (role mdm or tiebreaker; Validate holds
// each among the members), so that nodes join and renew while any one
// member is down.
func (s *Settings) Keeper() bool {
	return s.HasRole(RoleMDM) || s.HasRole(RoleTiebreaker)
}

// CreatesCA reports whether this SVM creates the cluster CA at first boot:
// the first MDM member of a new system. The other members fetch a copy from
// a member that has it once they hold their mdm certificate (`cairn pki
// fetch-ca`). An SVM given a join token joins an existing system, whose CA
// it must never replace, even as the first member (its host rebuilt).
func (s *Settings) CreatesCA() bool {
	return s.Keeper() && len(s.MDMMembers) > 0 && s.MDMMembers[0].Name == s.Hostname && !IsJoinToken(s.JoinToken)
}

// JoinURLs are the join services of every MDM member, the first member's
// (which creates the CA, so it serves first at a new system's first boot)
// first.
func (s *Settings) JoinURLs() []string {
	out := make([]string, len(s.MDMMembers))
	for i, m := range s.MDMMembers {
		out[i] = m.JoinURL()
	}
	return out
}

func hostPort(a netip.Addr, port int) string {
	return netip.AddrPortFrom(a, uint16(port)).String()
}

// FormatMembers writes members in the cairn.cluster.mdm_members format.
func FormatMembers(ms []Member) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Name + "=" + m.Addr.String()
	}
	return strings.Join(parts, ",")
}

// parseMembers reads "name=address,..." and reports problems through bad.
func parseMembers(v string, bad func(format string, a ...any)) []Member {
	var out []Member
	for _, f := range strings.FieldsFunc(v, listSplitter) {
		name, addr, ok := strings.Cut(f, "=")
		name = strings.ToLower(name)
		if !ok {
			bad("%q is not name=address (e.g. cairn-esx01=192.0.2.11)", Clip(f))
			continue
		}
		if err := checkHostname(name); err != nil {
			bad("member name: %v", err)
			continue
		}
		ip, err := netip.ParseAddr(addr)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
			bad("member %s: %q is not a usable IP address", name, Clip(addr))
			continue
		}
		dup := false
		for _, m := range out {
			if m.Name == name || m.Addr == ip {
				bad("member %s=%s repeats a name or an address of %s=%s", name, ip, m.Name, m.Addr)
				dup = true
			}
		}
		if !dup {
			out = append(out, Member{Name: name, Addr: ip})
		}
	}
	if len(out) > maxMDMMembers {
		bad("%d members given, at most %d allowed", len(out), maxMDMMembers)
	}
	return out
}

// parseNetworks reads "address/prefix or address,..." (masked, no duplicates, not
// everything) and reports problems through bad.
func parseNetworks(v string, max int, allMsg string, bad func(format string, a ...any)) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(v, listSplitter) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			ip, aerr := netip.ParseAddr(f)
			if aerr != nil || ip.Zone() != "" {
				bad("%q is not a network: write address/prefix or an address, e.g. 192.0.2.0/24", Clip(f))
				continue
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		p = p.Masked()
		switch {
		case p.Bits() == 0:
			bad("%s %s", p, allMsg)
		case slices.Contains(out, p):
			bad("%s given twice", p)
		default:
			out = append(out, p)
		}
	}
	if len(out) > max {
		bad("%d networks given, at most %d allowed", len(out), max)
	}
	return out
}

func parsePort(v string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is not a relative target port id (1-65535)", Clip(v))
	}
	return uint16(n), nil
}

func rolesStrings(rs []Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// HasRole reports whether r is among s.Roles.
func (s *Settings) HasRole(r Role) bool { return slices.Contains(s.Roles, r) }

// FieldError is one rejected setting. Errors from Validate are a join of them.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

var (
	hostLabelRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	clusterRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	joinTokenRE  = regexp.MustCompile(`^[A-Za-z0-9._~+/=:-]{16,512}$`)
	listSplitter = func(r rune) bool { return r == ',' || r == ' ' }
)

// Validate checks raw key/value settings and returns the typed Settings. It reports
// every problem at once (joined *FieldError values), so an admin fixes them in one pass.
// Unknown keys under the "cairn." prefix are errors (a typo must not be silently
// ignored); other keys are ignored by the callers before they get here.
func Validate(raw map[string]string) (*Settings, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	get := func(key string) string {
		v, ok := raw[key]
		if !ok {
			v = Defaults()[key]
		}
		return strings.TrimSpace(v)
	}
	if len(raw) > MaxSettings {
		return nil, fmt.Errorf("%d settings given, at most %d are accepted", len(raw), MaxSettings)
	}
	keys := Keys()
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		if !slices.Contains(keys, k) {
			bad(k, "unknown setting (known: %s)", strings.Join(keys, ", "))
			continue
		}
		if len(v) > MaxValueLen {
			bad(k, "value is %d bytes long, at most %d allowed", len(v), MaxValueLen)
			continue
		}
		if !utf8.ValidString(v) {
			bad(k, "value is not valid UTF-8")
			continue
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				bad(k, "value contains control character %U", r)
				break
			}
		}
	}
	if len(errs) > 0 {
		// Do not interpret values that failed the basic checks.
		return nil, errors.Join(errs...)
	}

	s := &Settings{}
	if h := strings.ToLower(get(KeyHostname)); h == "" {
		bad(KeyHostname, "required: the SVM's host name, e.g. svm-esx01")
	} else if err := checkHostname(h); err != nil {
		bad(KeyHostname, "%v", err)
	} else {
		s.Hostname = h
	}

	if a, err := parseAddress(get(KeyMgmtAddress)); err != nil {
		bad(KeyMgmtAddress, "%v", err)
	} else if !a.IsSet() {
		bad(KeyMgmtAddress, `required: "dhcp" or a static address with prefix length, e.g. 192.0.2.10/24`)
	} else {
		s.Mgmt = a
	}

	if g := get(KeyMgmtGateway); g != "" {
		ip, err := netip.ParseAddr(g)
		switch {
		case err != nil:
			bad(KeyMgmtGateway, "not an IP address: %q", Clip(g))
		case ip.Zone() != "" || !ip.IsGlobalUnicast() && !ip.IsPrivate():
			bad(KeyMgmtGateway, "%s is not a unicast address", ip)
		case s.Mgmt.DHCP:
			bad(KeyMgmtGateway, "set, but the management address is dhcp: leave the gateway empty or give a static address")
		case s.Mgmt.Prefix.IsValid() && !s.Mgmt.Prefix.Contains(ip):
			bad(KeyMgmtGateway, "%s is outside the management network %s", ip, s.Mgmt.Prefix.Masked())
		case s.Mgmt.Prefix.IsValid() && ip == s.Mgmt.Prefix.Addr():
			bad(KeyMgmtGateway, "%s is the SVM's own management address", ip)
		default:
			s.Gateway = ip
		}
	}

	if a, err := parseAddress(get(KeyDataAddress)); err != nil {
		bad(KeyDataAddress, "%v", err)
	} else {
		s.Data = a
		if a.Prefix.IsValid() && s.Mgmt.Prefix.IsValid() && a.Prefix.Overlaps(s.Mgmt.Prefix) {
			bad(KeyDataAddress, "%s overlaps the management network %s: use a separate subnet, or leave it empty to carry data on the management network",
				a.Prefix, s.Mgmt.Prefix)
		}
	}

	for _, f := range strings.FieldsFunc(get(KeyDNS), listSplitter) {
		ip, err := netip.ParseAddr(f)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			bad(KeyDNS, "not a DNS server address: %q", Clip(f))
			continue
		}
		s.DNS = append(s.DNS, ip)
	}
	if len(s.DNS) > maxDNSServers {
		bad(KeyDNS, "%d servers given, at most %d are used", len(s.DNS), maxDNSServers)
	}

	for _, f := range strings.FieldsFunc(get(KeyNTP), listSplitter) {
		f = strings.ToLower(f)
		if ip, err := netip.ParseAddr(f); err == nil {
			if ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
				bad(KeyNTP, "not an NTP server address: %s", ip)
				continue
			}
			s.NTP = append(s.NTP, ip.String())
			continue
		}
		if err := checkHostname(f); err != nil {
			bad(KeyNTP, "%q is neither an IP address nor a host name", Clip(f))
			continue
		}
		s.NTP = append(s.NTP, f)
	}
	if len(s.NTP) > maxNTPServers {
		bad(KeyNTP, "%d servers given, at most %d allowed", len(s.NTP), maxNTPServers)
	}

	for _, f := range strings.FieldsFunc(strings.ToLower(get(KeyRoles)), listSplitter) {
		r := Role(f)
		switch {
		case !slices.Contains(allRoles, r):
			bad(KeyRoles, "unknown role %q (roles: mdm, tiebreaker, sds, target, gateway)", Clip(f))
		case slices.Contains(s.Roles, r):
			bad(KeyRoles, "role %q given twice", r)
		default:
			s.Roles = append(s.Roles, r)
		}
	}
	if len(s.Roles) == 0 && !hasKeyError(errs, KeyRoles) {
		bad(KeyRoles, "required: at least one of mdm, tiebreaker, sds, target, gateway")
	}
	if s.HasRole(RoleMDM) && s.HasRole(RoleTiebreaker) {
		bad(KeyRoles, "mdm and tiebreaker exclude each other: a tie-breaker is an MDM member without the control loop")
	}

	if c := get(KeyClusterName); c == "" {
		bad(KeyClusterName, "required: the name of the Cairn cluster to join or create")
	} else if !clusterRE.MatchString(c) {
		bad(KeyClusterName, "%q: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", Clip(c))
	} else {
		s.ClusterName = c
	}

	if t := get(KeyJoinToken); t != "" {
		if !ValidBootstrapToken(t) {
			// Never echo the token: it is a secret.
			bad(KeyJoinToken, "malformed: 16-512 characters from A-Z a-z 0-9 . _ ~ + / = : -")
		} else {
			s.JoinToken = t
		}
	}

	s.MDMMembers = parseMembers(get(KeyMDMMembers), func(f string, a ...any) { bad(KeyMDMMembers, f, a...) })
	if s.HasRole(RoleMDM) || s.HasRole(RoleTiebreaker) {
		self := -1
		for i, m := range s.MDMMembers {
			if m.Name == s.Hostname {
				self = i
			}
		}
		switch {
		case len(s.MDMMembers) == 0 || s.Hostname == "":
		case self < 0:
			bad(KeyMDMMembers, "this SVM (%s) has an MDM role but is not among the members: add %s=<its management address>", s.Hostname, s.Hostname)
		case s.Mgmt.Prefix.IsValid() && s.MDMMembers[self].Addr != s.Mgmt.Prefix.Addr():
			bad(KeyMDMMembers, "member %s has address %s, but this SVM's management address is %s", s.Hostname, s.MDMMembers[self].Addr, s.Mgmt.Prefix.Addr())
		}
	}

	for _, f := range strings.FieldsFunc(get(KeyGateways), listSplitter) {
		ip, err := netip.ParseAddr(f)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			bad(KeyGateways, "not a gateway address: %q (give management IP addresses)", Clip(f))
			continue
		}
		if slices.Contains(s.Gateways, ip) {
			bad(KeyGateways, "%s given twice", ip)
			continue
		}
		s.Gateways = append(s.Gateways, ip)
	}
	if len(s.Gateways) > maxGateways {
		bad(KeyGateways, "%d gateways given, at most %d allowed", len(s.Gateways), maxGateways)
	}

	for _, f := range strings.FieldsFunc(get(KeySVMs), listSplitter) {
		ip, err := netip.ParseAddr(f)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
			bad(KeySVMs, "not an SVM address: %q (give the management and data IP addresses of every SVM)", Clip(f))
			continue
		}
		if slices.Contains(s.SVMs, ip) {
			bad(KeySVMs, "%s given twice", ip)
			continue
		}
		s.SVMs = append(s.SVMs, ip)
	}
	if len(s.SVMs) > maxSVMAddrs {
		bad(KeySVMs, "%d addresses given, at most %d allowed", len(s.SVMs), maxSVMAddrs)
	}

	s.DataClients = parseNetworks(get(KeyDataClients), maxDataClients, "opens etcd and the data path to every address: name the client machines or their networks",
		func(f string, a ...any) { bad(KeyDataClients, f, a...) })
	s.SSHAllowFrom = parseNetworks(get(KeySSHAllowFrom), maxSSHNets, "opens SSH to every address: leave the setting empty for the management network, or name the admin networks",
		func(f string, a ...any) { bad(KeySSHAllowFrom, f, a...) })

	if v := get(KeyTargetPortID); v != "" {
		n, err := parsePort(v)
		if err != nil {
			bad(KeyTargetPortID, "%v", err)
		} else {
			s.TargetPortID = n
		}
	}
	for _, f := range strings.FieldsFunc(get(KeyTargetPorts), listSplitter) {
		n, err := parsePort(f)
		switch {
		case err != nil:
			bad(KeyTargetPorts, "%v", err)
		case slices.Contains(s.TargetPorts, n):
			bad(KeyTargetPorts, "port %d given twice: every target SVM needs its own id", n)
		default:
			s.TargetPorts = append(s.TargetPorts, n)
		}
	}
	if len(s.TargetPorts) > maxPorts {
		bad(KeyTargetPorts, "%d ports given, at most %d allowed", len(s.TargetPorts), maxPorts)
	}
	if s.TargetPortID != 0 && len(s.TargetPorts) > 0 && !slices.Contains(s.TargetPorts, s.TargetPortID) {
		bad(KeyTargetPorts, "does not include this SVM's own port %d (%s)", s.TargetPortID, KeyTargetPortID)
	}

	// What each role needs, from the property table. Keys that already have an error
	// are not reported twice.
	for _, p := range properties {
		if p.Required(s.Roles) && get(p.Key) == "" && !hasKeyError(errs, p.Key) {
			bad(p.Key, "required on SVMs with roles %s (%s)", strings.Join(rolesStrings(s.Roles), ","), p.Label)
		}
	}

	if k := get(KeySSHKey); k != "" {
		if err := checkSSHKey(k); err != nil {
			bad(KeySSHKey, "%v", err)
		} else {
			s.SSHKey = k
		}
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func hasKeyError(errs []error, key string) bool {
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Key == key {
			return true
		}
	}
	return false
}

// checkHostname accepts an RFC 1123 host name in lower case (labels of letters, digits
// and inner hyphens), which also keeps it free of anything a shell or config file
// would interpret.
func checkHostname(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("host name is %d characters long, at most 253 allowed", len(h))
	}
	for _, label := range strings.Split(h, ".") {
		if !hostLabelRE.MatchString(label) {
			return fmt.Errorf("%q is not a valid host name: use labels of 1-63 letters, digits and inner hyphens, separated by dots", Clip(h))
		}
	}
	return nil
}

func parseAddress(v string) (Address, error) {
	switch strings.ToLower(v) {
	case "":
		return Address{}, nil
	case "dhcp":
		return Address{DHCP: true}, nil
	}
	p, err := netip.ParsePrefix(v)
	if err != nil {
		if _, aerr := netip.ParseAddr(v); aerr == nil {
			return Address{}, fmt.Errorf("%q has no prefix length: write it as address/length, e.g. %s/24", Clip(v), v)
		}
		return Address{}, fmt.Errorf(`%q is neither "dhcp" nor an address with prefix length (e.g. 192.0.2.10/24)`, Clip(v))
	}
	ip := p.Addr()
	switch {
	case ip.IsLoopback(), ip.IsMulticast(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsInterfaceLocalMulticast():
		return Address{}, fmt.Errorf("%s is not a usable interface address", ip)
	case ip.Is4() && (p.Bits() < 8 || p.Bits() > 32), ip.Is6() && (p.Bits() < 16 || p.Bits() > 128):
		return Address{}, fmt.Errorf("prefix length /%d is not plausible for %s", p.Bits(), ip)
	case ip.Is4() && p.Bits() <= 30 && (ip == p.Masked().Addr() || ip == lastAddr(p)):
		return Address{}, fmt.Errorf("%s is the network or broadcast address of %s", ip, p.Masked())
	}
	return Address{Prefix: p}, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

var sshKeyTypes = []string{
	"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
	"sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
}

// checkSSHKey accepts exactly one public key "type base64 [comment]". No authorized_keys
// options (command=, from=...) are allowed: the first field must be a key type. The blob
// must decode and name the same type, which catches truncated pastes.
func checkSSHKey(k string) error {
	f := strings.Fields(k)
	if len(f) < 2 {
		return errors.New(`expected one OpenSSH public key: "ssh-ed25519 AAAA... comment"`)
	}
	if !slices.Contains(sshKeyTypes, f[0]) {
		return fmt.Errorf("key type %q is not supported (use one of %s; no authorized_keys options)", Clip(f[0]), strings.Join(sshKeyTypes, ", "))
	}
	blob, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil {
		return errors.New("the key data is not valid base64: was the key truncated when pasted?")
	}
	if len(blob) < 4 || int(binary.BigEndian.Uint32(blob)) != len(f[0]) || len(blob) < 4+len(f[0]) || string(blob[4:4+len(f[0])]) != f[0] {
		return fmt.Errorf("the key data does not hold a %s key", f[0])
	}
	if c := strings.Join(f[2:], " "); len(c) > 256 {
		return errors.New("the key comment is longer than 256 characters")
	}
	return nil
}

// ValidBootstrapToken reports whether s has the form of a bootstrap token
// (KeyJoinToken): 16-512 characters from A-Z a-z 0-9 . _ ~ + / = : -. The
// gateway, the join service and first boot all hold a token to this one rule.
func ValidBootstrapToken(s string) bool { return joinTokenRE.MatchString(s) }

// JoinTokenPrefix begins every join token (internal/join: cj1.<id>.<secret>.<ca>),
// which the gateway makes for an SVM added to an existing system.
const JoinTokenPrefix = "cj1"

// IsJoinToken reports whether a cluster.join_token value is a join token rather
// than a new system's bootstrap token: anything that begins like one is one.
func IsJoinToken(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), JoinTokenPrefix+".") }

// clip shortens a value for an error message, so a huge hostile value does not flood
// the console and the journal.
func Clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// The etcd key layout: every key and prefix Cairn reads or writes is built
// here and nowhere else.

package model

import (
	"crypto/sha256"
	"encoding/hex"
)

// Key layout v1. Four roots: Prefix holds the model and the cluster's
// runtime state; LogPrefix holds the events, alerts and jobs of the
// gateways; SecretPrefix holds the CHAP secrets and password hashes;
// UpgradePrefix holds update bundles, orders and the SVMs' update states. The
// last three are outside Prefix so that reading or watching the model never
// reads the log, a secret or a bundle. Values are JSON unless said otherwise.
//
//	key                                    value                     written by                        read by                                  lifetime
//	Prefix+"<kind>/<id>"                   the object (PD, SDS...)   Store ops (via the gateway)       catalog, gateway, MDM controller         until deleted
//	Prefix+"name/<kind>/<name>"            id (text)                 Store, in the object's txn        Store (names, uniqueness)                with the object
//	Prefix+"system"                        System                    Store.Bootstrap                   catalog, gateway                         forever
//	Prefix+"schema"                        Schema (schema.go)        MDM leader, when missing          every daemon at start, MDM leader        forever (raised only after a roll)
//	Prefix+"epoch"                         placement epoch (dec.)    MDM controller, in map txns       catalog, MDM controller                  forever
//	Prefix+"map/<pool>"                    PlacementMap              MDM controller                    catalog (SDS, client), gateway, Store    until its pool is deleted
//	Prefix+"live/sds/<sds id>"             SDSLive                   the running SDS                   MDM controller, catalog, Store, gateway  lease (the SDS process)
//	Prefix+"stats/sds/<sds id>"            SDSStats                  the running SDS, every few s      gateway (statistics, metrics), Store     lease (the SDS process)
//	Prefix+"stats/frontend/<instance>"     FrontendStats             NBD server, iSCSI frontend        gateway (statistics, metrics)            lease (the frontend)
//	Prefix+"filled/<pool>/<pg>/<device>"   copy's Since (dec.)       SDS primary, when a fill is done  MDM controller (deletes in map txn)      until consumed
//	Prefix+"devfailed/<device id>"          the I/O error (text)      SDS, when a device fails          MDM controller (deletes, sets state)     until consumed
//	Prefix+"session/<sha256 hex>"          gateway session           gateway, at login                 gateway, on every request                lease (session TTL)
//	Prefix+"token/bootstrap/<sha256 hex>"  bootstrap record          Store.PutBootstrapToken           Store.RedeemBootstrapToken               lease (token TTL); deleted when redeemed
//	Prefix+"throttle/user/<sha256 hex>"   failed-login counter      gateway, at each login attempt    gateway, before checking a password      lease (window + lockout); deleted on success
//	Prefix+"throttle/addr/<address>"      failed-login counter      gateway, at each login attempt    gateway, before checking a password      lease (window + lockout)
//	Prefix+"cert/<role>/<name>"            pki.Info (no secret)      each daemon with --pki, at start  gateway (certificates, expiry alerts)     lease (the daemon)
//	Prefix+"refused/<role>/<name>/<seq>"   refusals.Batch            a daemon that refused connections gateway (one event each, then deletes)     lease (1 h) or until consumed
//	Prefix+"election/..."                  etcd election keys        MDM members (concurrency)         MDM members, gateway                     lease (leader session)
//	Prefix+"handover"                      member name (text)        gateway (POST /mdm/leader)        MDM leader; the named member deletes it  lease (60 s) or until done
//	Prefix+"mdmrole/<member>"              {"tie_breaker": bool}     `cairn mdm` at start, gateway     gateway (MDM member list)                until the member is removed
//	Prefix+"svm/<host name>"               SVM                       `cairn peersync` at start         cairn peersync on every SVM (firewall)   until the SVM is removed (no lease)
//	UpgradePrefix+"bundle/<version>"     update.BundleInfo         gateway (POST /upgrade/bundles)   gateway, cairn updater                   until a third version is uploaded (2 kept)
//	UpgradePrefix+"chunk/<version>/<n>"  ≤ 1 MiB of the bundle      gateway, before its bundle key    cairn updater (update.Store.Bundle)      with its bundle key
//	UpgradePrefix+"order/<svm>"          update.Order              gateway (POST /upgrade/svms/{n})  that SVM's cairn updater                 until the next order
//	UpgradePrefix+"state/<svm>"          update.State              that SVM's cairn updater          gateway (GET /upgrade/svms)              forever (the SVM's last update)
//	SecretPrefix+"chap/<host id>"          CHAP secret (text)        Store, in the host's txn          Store (gateway), iSCSI target (LIO)      with the host's CHAP
//	SecretPrefix+"password/<user name>"    password hash (text)      Store, in the user's txn          Store.Authenticate (gateway)             with the user
//	SecretPrefix+"pki/ca-key"              sealed CA key (pki)       `cairn pki backup` (as mdm)       `cairn pki restore` (as mdm)             until the next backup
//	LogPrefix+"eventseq"                   last event number (dec.)  gateway, in each event's txn      gateway                                  forever
//	LogPrefix+"event/<16 hex digits>"      gateway Event             gateway                           gateway (GET /events, SSE)               10 000 events, 30 days
//	LogPrefix+"alert/<id>"                 gateway Alert             gateway                           gateway (GET /alerts)                    7 days after cleared
//	LogPrefix+"alertactive/<kind>/<obj>"   id of the active alert    gateway                           gateway (raise once, clear)              while the condition holds
//	LogPrefix+"job/<id>"                   gateway jobRecord         gateway                           gateway (any gateway runs any job)       1000 finished, 7 days after finishing
//	LogPrefix+"jobclaim/<id>"              gateway instance id       gateway, under a 10 s lease       gateway (who runs a device-add job)      while its gateway lives
//	LogPrefix+"jobindex/<sds>/<path hash>" id of the device-add job  gateway, with the job             gateway (a repeated add finds the job)   until the job ends
//
// Who may write (etcd access control, internal/mdm/rbac.go): each daemon's
// etcd user is its certificate's role. mdm and gateway are etcd's root; sds,
// target, nbd and client read Prefix and write only the keys the table above
// says they write (sds: live/sds, stats/sds, filled, devfailed; target and nbd:
// stats/frontend; each: cert/<its role>/; sds and target also svm/, for
// `cairn peersync` on an SVM without a root role). Not yet enforced per name: any
// sds may write any SDS's keys. LogPrefix is the gateway's alone. Of
// SecretPrefix only the target reads anything (SecretPrefix+"chap/", to
// configure LIO); sds, nbd and client read no secret. A new key written by
// a daemon that is not root needs its line in mdm/rbac.go.
//
// A secret key is written only in a transaction that also writes its
// object's key (the host, the user), under the object's mod revision: the
// object's revision guards its secret, and a watcher of the model (the
// target's catalog) sees a change of secret as a change of its host.
// Model objects keep a flag (Host.CHAP) or nothing (User), never the
// secret. A model written before SecretPrefix (secrets inline, in the
// objects' "chap_secret" and "password_hash") is moved by the MDM leader
// at the start of its term (Store.MoveSecrets).
//
// Tokens are stored only as the SHA-256 of the token (tokenHash): reading
// etcd does not reveal a usable token.
//
// Copy states in a PlacementMap ("state" of each copy): CopyReady is written
// as "ready"; maps written before it had a name leave "state" out (or ""),
// which still decodes as CopyReady (CopyRef.UnmarshalJSON). Copy states
// appear in no REST response: only Go code reads the maps.
const (
	// Prefix is the root of the model and the cluster's runtime state.
	Prefix = "/cairn/v1/"
	// LogPrefix is the root of the gateways' events, alerts and jobs.
	LogPrefix = "/cairn/log/v1/"
)

// Model objects.

// Key returns the key of an object.
func Key(kind, id string) string { return Prefix + kind + "/" + id }

// KindPrefix returns the prefix under which all objects of a kind live.
func KindPrefix(kind string) string { return Prefix + kind + "/" }

// NameKey returns the uniqueness index key of a name.
func NameKey(kind, name string) string { return Prefix + "name/" + kind + "/" + name }

// SystemKey holds the System object.
const SystemKey = Prefix + "system"

// Placement.

// EpochKey holds the cluster-wide placement epoch (decimal). It is bumped in
// the same transaction as every placement map change.
const EpochKey = Prefix + "epoch"

// MapPrefix is where the placement maps live, one per pool (MapKey).
const MapPrefix = Prefix + "map/"

// MapKey returns the placement map key of a pool.
func MapKey(poolID string) string { return MapPrefix + poolID }

// FilledPrefix holds fill reports: FilledPrefix+"<pool>/<pg>/<device>" =
// the copy's state epoch, written by the primary when it finished filling
// that copy (rebuild or resync); the MDM controller consumes (deletes) them
// in the transaction of the map that marks the copy ready.
const FilledPrefix = Prefix + "filled/"

// FilledPoolPrefix returns the prefix of a pool's fill reports; a report's
// key is FilledPoolPrefix(pool)+placement.FillKey(pg, device).
func FilledPoolPrefix(poolID string) string { return FilledPrefix + poolID + "/" }

// DeviceFailedPrefix holds device failure reports: DeviceFailedPrefix+
// "<device id>" = the I/O error that took the device out, written by its SDS
// (which may not write model objects); the MDM leader's controller consumes
// each (deletes it) in the transaction that sets the device's state to
// error. No lease: the report outlives an SDS that crashes right after.
const DeviceFailedPrefix = Prefix + "devfailed/"

// DeviceFailedKey returns the failure report key of a device.
func DeviceFailedKey(deviceID string) string { return DeviceFailedPrefix + deviceID }

// Runtime state published under leases.

// LivePrefix is where running SDSs announce themselves (LiveKey).
const LivePrefix = Prefix + "live/sds/"

// LiveKey returns the liveness key of an SDS.
func LiveKey(sdsID string) string { return LivePrefix + sdsID }

// StatsPrefix is the root of all published statistics.
const StatsPrefix = Prefix + "stats/"

// SDSStatsPrefix is where SDSs publish theirs (StatsKey).
const SDSStatsPrefix = StatsPrefix + "sds/"

// StatsKey returns the key of an SDS's published statistics.
func StatsKey(sdsID string) string { return SDSStatsPrefix + sdsID }

// FrontendStatsPrefix is where frontends publish their statistics.
const FrontendStatsPrefix = StatsPrefix + "frontend/"

// FrontendStatsKey returns the key of a frontend instance's statistics.
func FrontendStatsKey(instance string) string { return FrontendStatsPrefix + instance }

// Credentials (hashed).

// SessionPrefix is where the gateways keep login sessions (SessionKey).
const SessionPrefix = Prefix + "session/"

// SessionKey returns the key of the session a bearer token names.
func SessionKey(token string) string { return SessionPrefix + tokenHash(token) }

// TokenPrefix is the root of one-time tokens; today only the bootstrap
// token (bootstrapKey) lives under it.
const TokenPrefix = Prefix + "token/"

// bootstrapKey returns the key of a one-time bootstrap token.
func bootstrapKey(token string) string { return TokenPrefix + "bootstrap/" + tokenHash(token) }

// tokenHash is the hex SHA-256 a token is stored under.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ThrottlePrefix is where the gateways count failed logins (the gateway's
// throttle.go has the value's layout), shared so that every gateway of the
// cluster refuses a locked-out user or address.
const ThrottlePrefix = Prefix + "throttle/"

// ThrottleUserKey returns the counter key of a login name (hashed: a name
// in a request is unbounded and need not exist).
func ThrottleUserKey(name string) string { return ThrottlePrefix + "user/" + tokenHash(name) }

// ThrottleAddrKey returns the counter key of a client address (an IP, or an
// IPv6 /64 prefix, as text).
func ThrottleAddrKey(addr string) string { return ThrottlePrefix + "addr/" + addr }

// Certificates.

// CertPrefix is where running daemons publish their certificate's pki.Info
// (who, serial, expiry; nothing secret), under their process's lease.
const CertPrefix = Prefix + "cert/"

// CertKey returns the key a daemon publishes its certificate under.
func CertKey(role, name string) string { return CertPrefix + role + "/" + name }

// RefusedPrefix is where daemons report the connections they refused
// (refusals.Batch), consumed by a gateway into events.
const RefusedPrefix = Prefix + "refused/"

// RefusedKey returns the key of one report of daemon role/name.
func RefusedKey(role, name, seq string) string { return RefusedPrefix + role + "/" + name + "/" + seq }

// MDM members.

// ElectionPrefix is where MDM members campaign for leadership.
const ElectionPrefix = Prefix + "election/"

// Upgrade delivery (internal/update): the bundles the gateway received, in
// chunks, the version each SVM is ordered to run and each SVM updater's
// state. A root of its own, outside Prefix: the catalogs watch Prefix with
// values, and must not be sent tens of MiB of bundle chunks.
const (
	UpgradePrefix       = "/cairn/upgrade/v1/"
	UpgradeBundlePrefix = UpgradePrefix + "bundle/"
	UpgradeChunkPrefix  = UpgradePrefix + "chunk/"
	UpgradeOrderPrefix  = UpgradePrefix + "order/"
	UpgradeStatePrefix  = UpgradePrefix + "state/"
)

// LeaderHandoverKey is a request to hand the control loop to the MDM member
// it names (text), written by the gateway's POST /mdm/leader under a lease
// so that a request nobody can honour dies by itself. The elected leader
// resigns and campaigns again when the named member campaigns (it has a
// key under ElectionPrefix); the named member deletes the request when it
// wins. A request naming a member that does not campaign (down, a
// tie-breaker) changes nothing.
const LeaderHandoverKey = Prefix + "handover"

// MDMRolePrefix holds each member's Cairn role (MDMRolePrefix+name ->
// {"tie_breaker": bool}), written by `cairn mdm` at start and by the
// gateway's POST /mdm/members; the gateway's MDM member list reads it.
const MDMRolePrefix = Prefix + "mdmrole/"

// SVMs.

// SVMPrefix holds one record per SVM of the system (SVMKey), written by
// the SVM's own `cairn peersync` at every start and deleted when the SVM
// is removed. No lease on purpose: an SVM that is down (a reboot, a host
// in maintenance) must stay admitted by the other SVMs' firewalls, or it
// could never reach etcd to come back.
const SVMPrefix = Prefix + "svm/"

// SVMKey returns the key of an SVM's record (its host name).
func SVMKey(name string) string { return SVMPrefix + name }

// Secrets (outside Prefix: readable by mdm, gateway and, for CHAP, target).

// SecretPrefix is the root of the secrets.
const SecretPrefix = "/cairn/secret/v1/"

// CHAPSecretPrefix is where the hosts' CHAP secrets live (CHAPSecretKey).
const CHAPSecretPrefix = SecretPrefix + "chap/"

// CAKeyBackupKey holds the cluster CA's key sealed under a recovery key
// the admin keeps off the system (pki/backup.go; `cairn pki backup`).
// Readable by the root roles only (mdm, gateway), like every secret.
const CAKeyBackupKey = SecretPrefix + "pki/ca-key"

// JoinTokenPrefix is where the join tokens' records live (internal/join:
// the secret's hash, the roles, the expiry; spent by deleting).
const JoinTokenPrefix = SecretPrefix + "join/"

// JoinTokenKey returns the key of a join token's record.
func JoinTokenKey(id string) string { return JoinTokenPrefix + id }

// CHAPSecretKey returns the key of a host's CHAP secret.
func CHAPSecretKey(hostID string) string { return CHAPSecretPrefix + hostID }

// PasswordHashPrefix is where the users' password hashes live.
const PasswordHashPrefix = SecretPrefix + "password/"

// PasswordHashKey returns the key of a user's password hash.
func PasswordHashKey(user string) string { return PasswordHashPrefix + user }

// The gateways' log (see the table above).
const (
	EventSeqKey       = LogPrefix + "eventseq"
	EventPrefix       = LogPrefix + "event/"
	AlertPrefix       = LogPrefix + "alert/"
	AlertActivePrefix = LogPrefix + "alertactive/"
	JobPrefix         = LogPrefix + "job/"
	JobClaimPrefix    = LogPrefix + "jobclaim/"
	JobIndexPrefix    = LogPrefix + "jobindex/"
)

// JobKey returns the key of a job's record.
func JobKey(id string) string { return JobPrefix + id }

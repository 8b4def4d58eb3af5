package mdm

// etcd's access control for Cairn. etcd authenticates a client by its
// certificate (ClientCertAuth) and, with auth enabled, takes the
// certificate's common name as the etcd user: in Cairn that is the
// daemon's role (pki), so there is one password-less etcd user per role,
// and what a role may read and write is the permission table below.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootUser is the user etcd requires to exist, with the root role, before
// it enables auth. It has no password and no certificate names it, so
// nobody can act as it; mdm and gateway hold the root role themselves.
const rootUser = "root"

// rootRoles are the roles whose etcd user is root (etcd's superuser). The
// MDM runs the elections and the control loop over the whole model; the
// gateway writes the model and the log, and manages the MDM members
// (MemberAdd/Remove, MoveLeader, Status), which etcd allows only to root:
// etcd has no narrower permission for cluster administration.
var rootRoles = []string{pki.RoleMDM, pki.RoleGateway}

// perm is a permission on a key prefix.
type perm struct {
	prefix string
	typ    authpb.Permission_Type
}

// access is the permission table of the roles that are not root: each reads
// the model (catalog: placement maps, objects, liveness) and writes only the
// keys it publishes (model/keys.go, column "written by"). Secrets are
// outside the model prefix (model.SecretPrefix): only the target reads
// them, and only the CHAP secrets. An etcd role
// "cairn-<role>" holds the permissions; the user <role> holds that role.
// Roles not in this table and not root (host: an NBD initiator) have no
// etcd user, so etcd refuses them.
//
// A permission added here in a later version is granted by the next
// leader's EnsureAccess, and one removed here is revoked.
var access = map[string][]perm{
	pki.RoleSDS: {
		{model.Prefix, authpb.READ},
		{model.LivePrefix, authpb.WRITE},
		{model.SDSStatsPrefix, authpb.WRITE},
		{model.FilledPrefix, authpb.WRITE},
		{model.DeviceFailedPrefix, authpb.WRITE},
		{model.CertPrefix + pki.RoleSDS + "/", authpb.WRITE},
		{model.RefusedPrefix + pki.RoleSDS + "/", authpb.WRITE}, // refusals.Reporter
		{model.SVMPrefix, authpb.WRITE},                         // cairn peersync: this SVM's record
		// cairn updater runs with its SVM's sds certificate: it reads its
		// order and the bundle, and writes its state (internal/update).
		{model.UpgradePrefix, authpb.READ},
		{model.UpgradeStatePrefix, authpb.WRITE},
	},
	pki.RoleTarget: {
		{model.Prefix, authpb.READ},
		{model.CHAPSecretPrefix, authpb.READ}, // to configure CHAP in LIO; no other role reads a secret
		{model.FrontendStatsPrefix, authpb.WRITE},
		{model.CertPrefix + pki.RoleTarget + "/", authpb.WRITE},
		{model.RefusedPrefix + pki.RoleTarget + "/", authpb.WRITE}, // refusals.Reporter
		{model.SVMPrefix, authpb.WRITE},                            // cairn peersync: this SVM's record
	},
	pki.RoleNBD: {
		{model.Prefix, authpb.READ},
		{model.FrontendStatsPrefix, authpb.WRITE},
		{model.CertPrefix + pki.RoleNBD + "/", authpb.WRITE},
		{model.RefusedPrefix + pki.RoleNBD + "/", authpb.WRITE}, // refusals.Reporter
	},
	pki.RoleClient: {
		{model.Prefix, authpb.READ},
		{model.CertPrefix + pki.RoleClient + "/", authpb.WRITE},
		{model.RefusedPrefix + pki.RoleClient + "/", authpb.WRITE}, // refusals.Reporter
	},
}

// etcdRole is the etcd role holding a Cairn role's permissions.
func etcdRole(role string) string { return "cairn-" + role }

// EnsureAccess creates the etcd users and roles of the table above, brings
// their permissions to the table's, and enables auth. The elected MDM
// leader runs it at the start of each term, before the control loop. It is
// idempotent: when everything already matches it changes nothing (it
// writes nothing, so etcd's auth revision stays). It needs root, or auth
// still disabled (the first leader of a new cluster).
func EnsureAccess(ctx context.Context, cli *clientv3.Client, log *slog.Logger) error {
	changes := 0
	users := map[string]string{rootUser: "root"} // user -> etcd role
	for _, r := range rootRoles {
		users[r] = "root"
	}
	for role, perms := range access {
		users[role] = etcdRole(role)
		n, err := ensureRole(ctx, cli, etcdRole(role), perms)
		if err != nil {
			return err
		}
		changes += n
	}
	for user, role := range users {
		n, err := ensureUser(ctx, cli, user, role)
		if err != nil {
			return err
		}
		changes += n
	}
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("etcd auth status: %w", err)
	}
	if !st.Enabled {
		if _, err := cli.AuthEnable(ctx); err != nil {
			return fmt.Errorf("enable etcd auth: %w", err)
		}
		changes++
		log.Info("etcd access control enabled: each daemon's certificate role is its etcd user")
	}
	if changes > 0 {
		log.Info("etcd access control set up", "changes", changes)
	}
	return nil
}

func ensureRole(ctx context.Context, cli *clientv3.Client, name string, perms []perm) (int, error) {
	changes := 0
	r, err := cli.RoleGet(ctx, name)
	if errors.Is(err, rpctypes.ErrRoleNotFound) {
		if _, err := cli.RoleAdd(ctx, name); err != nil {
			return 0, fmt.Errorf("add etcd role %s: %w", name, err)
		}
		changes++
		r = &clientv3.AuthRoleGetResponse{}
	} else if err != nil {
		return 0, fmt.Errorf("read etcd role %s: %w", name, err)
	}
	have := map[[2]string]authpb.Permission_Type{}
	for _, p := range r.Perm {
		have[[2]string{string(p.Key), string(p.RangeEnd)}] = p.PermType
	}
	want := map[[2]string]bool{}
	for _, p := range perms {
		k := [2]string{p.prefix, clientv3.GetPrefixRangeEnd(p.prefix)}
		want[k] = true
		if t, ok := have[k]; ok && t == p.typ {
			continue
		}
		if _, err := cli.RoleGrantPermission(ctx, name, k[0], k[1], clientv3.PermissionType(p.typ)); err != nil {
			return 0, fmt.Errorf("grant %s on %s* to etcd role %s: %w", p.typ, p.prefix, name, err)
		}
		changes++
	}
	for k := range have {
		if want[k] {
			continue
		}
		if _, err := cli.RoleRevokePermission(ctx, name, k[0], k[1]); err != nil {
			return 0, fmt.Errorf("revoke [%s, %s) from etcd role %s: %w", k[0], k[1], name, err)
		}
		changes++
	}
	return changes, nil
}

func ensureUser(ctx context.Context, cli *clientv3.Client, user, role string) (int, error) {
	changes := 0
	u, err := cli.UserGet(ctx, user)
	if errors.Is(err, rpctypes.ErrUserNotFound) {
		// No password: the user is authenticated by its certificate.
		if _, err := cli.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
			return 0, fmt.Errorf("add etcd user %s: %w", user, err)
		}
		changes++
		u = &clientv3.AuthUserGetResponse{}
	} else if err != nil {
		return 0, fmt.Errorf("read etcd user %s: %w", user, err)
	}
	if !slices.Contains(u.Roles, role) {
		if _, err := cli.UserGrantRole(ctx, user, role); err != nil {
			return 0, fmt.Errorf("grant etcd role %s to user %s: %w", role, user, err)
		}
		changes++
	}
	return changes, nil
}

// The gateway users the plugin server calls a deployed system as, one per
// gateway role: a vSphere user's request goes to the gateway as the
// service user of the role its Cairn privilege allows, naming the vSphere
// user in X-Cairn-On-Behalf-Of (the users are delegates: the gateway
// records that name in its audit events). Their passwords are generated
// and kept in the deploy state file (0600) with the admin password.

package deploy

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// ServiceRoles are the gateway roles that have a service user.
var ServiceRoles = []string{gateway.RoleMonitor, gateway.RoleOperator, gateway.RoleAdmin}

// ServiceUser is the gateway user name of role's service user.
func ServiceUser(role string) string { return "vcenter-" + role }

// EnsureServiceUser makes role's service user exist on the gateway as a
// delegate of that role, with the password st keeps (generated and saved
// with save first, so a password is never set on the gateway without
// being on disk). admin must be logged in as an admin. A user of that name
// that exists already (made by an earlier run that stopped before saving,
// or changed by hand) gets the kept password, role and delegate back.
func EnsureServiceUser(ctx context.Context, admin gateway.API, st *State, role string, save func() error) error {
	users, ok := admin.(gateway.Users)
	if !ok {
		return errors.New("this gateway client cannot administer users")
	}
	name := ServiceUser(role)
	pw := st.Secrets.ServiceUsers[role]
	if pw == "" {
		if st.Secrets.ServiceUsers == nil {
			st.Secrets.ServiceUsers = map[string]string{}
		}
		pw = secret()
		st.Secrets.ServiceUsers[role] = pw
		if err := save(); err != nil {
			return err
		}
		// A user of this name with another password may exist: reset it.
		if _, err := users.GetUser(ctx, name); err == nil {
			return resetServiceUser(ctx, users, name, role, pw)
		} else if !errors.Is(err, gateway.ErrNotFound) {
			return fmt.Errorf("look up gateway user %s: %w", name, err)
		}
	} else {
		u, err := users.GetUser(ctx, name)
		switch {
		case err == nil && u.Role == role && u.Delegate:
			return nil
		case err == nil:
			return resetServiceUser(ctx, users, name, role, pw)
		case !errors.Is(err, gateway.ErrNotFound):
			return fmt.Errorf("look up gateway user %s: %w", name, err)
		}
	}
	if _, err := users.CreateUser(ctx, gateway.UserSpec{Name: name, Role: role, Password: pw, Delegate: true}); err != nil {
		return fmt.Errorf("create gateway user %s: %w", name, err)
	}
	return nil
}

func resetServiceUser(ctx context.Context, users gateway.Users, name, role, pw string) error {
	yes := true
	if _, err := users.UpdateUser(ctx, name, gateway.UserUpdate{Role: role, Password: pw, Delegate: &yes}); err != nil {
		return fmt.Errorf("reset gateway user %s: %w", name, err)
	}
	return nil
}

// createServiceUsers is the step cluster/service-users.
func (r *run) createServiceUsers(ctx context.Context) (string, error) {
	for _, role := range ServiceRoles {
		if err := EnsureServiceUser(ctx, r.api, r.st, role, func() error { return r.st.Save(r.StateDir) }); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s, %s, %s", ServiceUser(ServiceRoles[0]), ServiceUser(ServiceRoles[1]), ServiceUser(ServiceRoles[2])), nil
}

// ServiceGatewayConfig is GatewayConfig logged in as role's service user,
// naming onBehalfOf; the service user must exist (EnsureServiceUser).
func ServiceGatewayConfig(cfg gateway.Config, st *State, role, onBehalfOf string) (gateway.Config, error) {
	pw := st.Secrets.ServiceUsers[role]
	if pw == "" {
		return cfg, fmt.Errorf("no password kept for gateway user %s", ServiceUser(role))
	}
	cfg.Username, cfg.Password, cfg.OnBehalfOf = ServiceUser(role), pw, onBehalfOf
	return cfg, nil
}

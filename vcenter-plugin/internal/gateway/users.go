package gateway

import (
	"context"
	"net/http"
)

// OnBehalfOfHeader names the person a delegate user acts for (the
// gateway's audit events record it).
const OnBehalfOfHeader = "X-Cairn-On-Behalf-Of"

// Gateway roles, least first.
const (
	RoleMonitor  = "monitor"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// User is a gateway account (GET /api/v1/users/{name}).
type User struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Delegate bool   `json:"delegate"`
}

// UserSpec creates a user; Delegate lets it send OnBehalfOfHeader.
type UserSpec struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Password string `json:"password"`
	Delegate bool   `json:"delegate,omitempty"`
}

// UserUpdate changes a user: empty fields and nil stay.
type UserUpdate struct {
	Role     string `json:"role,omitempty"`
	Password string `json:"password,omitempty"`
	Delegate *bool  `json:"delegate,omitempty"`
}

// Users is the user administration the plugin needs (admin only on the
// gateway): its per-role service users. *HTTPClient and the fake have it.
type Users interface {
	GetUser(ctx context.Context, name string) (*User, error)
	CreateUser(ctx context.Context, spec UserSpec) (*User, error)
	UpdateUser(ctx context.Context, name string, up UserUpdate) (*User, error)
}

func (c *HTTPClient) GetUser(ctx context.Context, name string) (*User, error) {
	return getOne[User](ctx, c, "users", name)
}

func (c *HTTPClient) CreateUser(ctx context.Context, spec UserSpec) (*User, error) {
	return create[User](ctx, c, "users", spec)
}

func (c *HTTPClient) UpdateUser(ctx context.Context, name string, up UserUpdate) (*User, error) {
	var out User
	if err := c.do(ctx, http.MethodPatch, "/api/v1/users/"+esc(name), up, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

var _ Users = (*HTTPClient)(nil)

package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// DefaultBootstrapTokenTTL bounds how long a new system's bootstrap token is accepted
// after its first gateway created the admin user (the contract's lifetime).
const DefaultBootstrapTokenTTL = contract.BootstrapTokenLifetime

// storeBootstrapToken records the token of cfg.BootstrapTokenFile for user "admin".
// Called only by a gateway that found no user at all (a new system), just before it
// creates the first admin, so a token can never reopen an existing system.
func (s *Server) storeBootstrapToken(ctx context.Context) error {
	if s.cfg.BootstrapTokenFile == "" {
		return nil
	}
	b, err := os.ReadFile(s.cfg.BootstrapTokenFile)
	if err != nil {
		return fmt.Errorf("read bootstrap token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if !contract.ValidBootstrapToken(tok) {
		return fmt.Errorf("bootstrap token in %s is malformed (16-512 characters from A-Z a-z 0-9 . _ ~ + / = : -)", s.cfg.BootstrapTokenFile)
	}
	ttl := s.cfg.BootstrapTokenTTL
	if ttl <= 0 {
		ttl = DefaultBootstrapTokenTTL
	}
	// Retried: the first gateway of a new system starts while its MDMs
	// still settle (under TCG an etcd write can time out for a minute), and
	// a token not stored is a deployer locked out of the system it just
	// built (the OVA join test's first run: 401 on a token that was never
	// written). Bounded, so that a gateway still starts and the password
	// file remains the way in.
	wait, giveUp := 500*time.Millisecond, time.Now().Add(bootstrapTokenRetryFor)
	for {
		err = s.store.PutBootstrapToken(ctx, tok, "admin", ttl)
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(giveUp) {
			return err
		}
		s.log.Warn("bootstrap token not stored yet; retrying", "in", wait.String(), "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
	// Never log the token; say how long it is good for.
	s.log.Info("bootstrap token accepted for the first admin password", "valid_for", ttl.String())
	return nil
}

// bootstrapTokenRetryFor bounds the retries of storing the token.
var bootstrapTokenRetryFor = 2 * time.Minute

type bootstrapTokenRequest struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

// redeemBootstrapToken: POST /api/v1/bootstrap/admin-password (no login: the token is
// the credential).
func (s *Server) redeemBootstrapToken(c *call) (int, any, error) {
	var req bootstrapTokenRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	c.auditUser = "bootstrap-token"
	if req.Token == "" || req.Password == "" {
		return 0, nil, errorf(http.StatusBadRequest, "give token and password")
	}
	gate, err := s.admitLogin(c, bootstrapThrottleName)
	if err != nil {
		return 0, nil, err
	}
	u, err := s.store.RedeemBootstrapToken(c.ctx, req.Token, req.Password)
	gate.done(c.ctx, outcomeOf(err))
	if errors.Is(err, model.ErrBadCredentials) {
		return 0, nil, errorf(http.StatusUnauthorized, "bootstrap token unknown, expired or already used: log in as admin with the password in %s on the SVM of the system's first gateway instead",
			filepath.Join("<gateway state dir>", AdminPasswordFile))
	}
	if err != nil {
		return 0, nil, err
	}
	// The generated first password no longer works: do not leave it lying around.
	if err := os.Remove(filepath.Join(s.cfg.StateDir, AdminPasswordFile)); err == nil {
		s.log.Info("removed the first admin password file: the deployer set the admin password with the bootstrap token")
	}
	return http.StatusOK, userViewOf(u), nil
}

package deploy

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

// StateVersion is the version of the state file format.
//
// The state file (<StateDir>/deploy-<system>.json, mode 0600: it holds the
// cluster secrets) records what a deployment has done, so a re-run after a
// failure continues where it stopped and never creates anything twice:
//
//	{"version":1, "system":"cairn1", "plan_sha256":"…",
//	 "secrets":{"bootstrap_token":"…","admin_password":"…"},
//	 "gateway_thumbprints":{"esx-04.cairn.test":"…"},
//	 "steps":{"svm/esx-01.cairn.test/clone":{"done":true,"time":"…","detail":"vm-42"}, …},
//	 "completed":false, "last_error":"…"}
//
// Steps are also checked against vCenter and the gateway (a VM found by
// name is not cloned again), so a lost state file costs the secrets only.
const StateVersion = 2

type State struct {
	Version    int          `json:"version"`
	System     string       `json:"system"`
	PlanSHA256 string       `json:"plan_sha256"`
	Secrets    plan.Secrets `json:"secrets"`
	// GatewayThumbprints pins each gateway SVM's certificate (SHA-256, hex), by ESXi
	// host, as the SVM published it through guestinfo.
	GatewayThumbprints map[string]string `json:"gateway_thumbprints,omitempty"`
	// JoinTokenIDs is, by ESXi host, the id of the join token a joining
	// SVM (Expand, Replace) was last given in its vApp properties: the id
	// only, never the token. The power-on step asks the gateway about it
	// (jointoken.go); the change's end forgets them.
	JoinTokenIDs map[string]string    `json:"join_token_ids,omitempty"`
	Steps        map[string]StepState `json:"steps"`
	Completed    bool                 `json:"completed"`
	LastError    string               `json:"last_error,omitempty"`
	// Change is an expansion or a host removal in progress (expand.go);
	// nil when none is.
	Change *Change `json:"change,omitempty"`
}

// Change is a change of a deployed system in progress. Until it ends the
// system's plan is still the deployed one (PlanSHA256); the state also
// loads with the plan the change leads to (Change.PlanSHA256), so a plugin
// stopped between saving that plan and ending the change resumes.
type Change struct {
	Kind string `json:"kind"`           // ChangeExpand, ChangeShrink, ChangeReplace or ChangeUpgrade
	Host string `json:"host,omitempty"` // shrink: the host removed; replace: the failed host
	// Upgrade (upgrade.go): the version rolled to and the hosts asked for
	// (none: every SVM); its plan is the deployed one.
	Version    string    `json:"version,omitempty"`
	Hosts      []string  `json:"hosts,omitempty"`
	PlanSHA256 string    `json:"plan_sha256"` // of the plan after the change
	Started    time.Time `json:"started"`
}

type StepState struct {
	Done   bool      `json:"done"`
	Time   time.Time `json:"time"`
	Detail string    `json:"detail,omitempty"`
}

func planHash(p *plan.Plan) string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func secret() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// StatePath is where the state of system's deployment lives.
func StatePath(dir, system string) string {
	return filepath.Join(dir, "deploy-"+system+".json")
}

// LoadState reads the state of system, or starts a new one for p.
func LoadState(dir string, p *plan.Plan) (*State, error) {
	path := StatePath(dir, p.System)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &State{Version: StateVersion, System: p.System, PlanSHA256: planHash(p),
			Secrets: plan.Secrets{BootstrapToken: secret(), AdminPassword: secret()}, Steps: map[string]StepState{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read deploy state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("deploy state %s is damaged (%v): fix or move it away; without it the cluster secrets are lost", path, err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("deploy state %s has version %d, this plugin reads %d", path, s.Version, StateVersion)
	}
	if s.PlanSHA256 != planHash(p) && (s.Change == nil || s.Change.PlanSHA256 != planHash(p)) {
		if s.Completed {
			return nil, fmt.Errorf("system %s is deployed with another plan: grow it with POST /api/v1/systems/%s/expand (the deployed plan plus new hosts), remove a host with POST /api/v1/systems/%s/hosts/{host}/remove", p.System, p.System, p.System)
		}
		return nil, fmt.Errorf("the plan of system %s changed since its deployment started: resume with the original plan, or remove %s and the SVMs to start over", p.System, path)
	}
	if s.Steps == nil {
		s.Steps = map[string]StepState{}
	}
	return &s, nil
}

// Save writes the state atomically (statefile: temp file, fsync, rename).
func (s *State) Save(dir string) error {
	if err := statefile.WriteJSON(StatePath(dir, s.System), s); err != nil {
		return fmt.Errorf("write deploy state: %w", err)
	}
	return nil
}

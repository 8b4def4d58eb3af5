package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSVMRecord: record, show, list, change and delete an SVM's record over a
// real gateway and etcd, and the refusals, each saying what to give.
func TestSVMRecord(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.login()
	h.fails(2, "--address", "svm", "record", "svm-a")
	h.fails(2, "--target-port 70000", "svm", "record", "svm-a", "--address", "10.0.0.5", "--target-port", "70000")
	h.fails(1, "not a unicast IP address", "svm", "record", "svm-a", "--address", "10.0.0.5,nonsense")
	h.fails(1, `role "dancer"`, "svm", "record", "svm-a", "--address", "10.0.0.5", "--role", "dancer")
	h.fails(1, "has no record", "svm", "info", "svm-a")

	h.ok("svm", "record", "svm-a", "--address", "10.0.0.5, 10.1.0.5", "--role", "sds,target", "--target-port", "3")
	var rec struct {
		Name       string
		Addresses  []string
		Roles      []string
		TargetPort int `json:"target_port"`
	}
	if err := json.Unmarshal([]byte(h.ok("svm", "info", "svm-a", "--json")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Name != "svm-a" || strings.Join(rec.Addresses, " ") != "10.0.0.5 10.1.0.5" || strings.Join(rec.Roles, " ") != "sds target" || rec.TargetPort != 3 {
		t.Fatalf("recorded %+v", rec)
	}
	// A repeat replaces the record: the address left is gone.
	h.ok("svm", "record", "svm-a", "--address", "10.0.0.6", "--role", "sds")
	out := h.ok("svm", "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "10.0.0.6") || strings.Contains(out, "10.0.0.5") {
		t.Fatalf("svm ls:\n%s", out)
	}
	if got := h.ok("svm", "rm", "svm-a"); !strings.Contains(got, "deleted svm svm-a") {
		t.Fatalf("svm rm: %q", got)
	}
	h.fails(1, "has no record", "svm", "info", "svm-a")
	// Deleting again changes nothing (a removal that resumes).
	h.ok("svm", "rm", "svm-a")
}

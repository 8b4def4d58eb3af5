package contract

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

func TestRepeatableRequest(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/volumes?pool=p", true},
		{"PATCH", "/api/v1/volumes/v1", true},
		{"PUT", "/svms/esx1", true},
		{"POST", "/volumes", true},
		{"POST", "/api/v1/sds", true},
		{"POST", "/devices", true},
		{"POST", "/system/bootstrap", true},
		{"POST", "/api/v1/volumes/v%201/map", true},
		{"POST", "/volumes/v1/unmap", true},
		{"POST", "/sds/s1/maintenance", true},
		{"POST", "/fault-sets/f1/maintenance", true},
		{"DELETE", "/volumes/v1", false},
		{"DELETE", "/sds/s1/maintenance", false},
		{"POST", "/users", false},
		{"POST", "/api/v1/login", false},
		{"POST", "/logout", false},
		{"POST", "/bootstrap/admin-password", false},
		{"POST", "/system/join-tokens", false},
		{"POST", "/upgrade/bundles", false},
		{"POST", "/upgrade/svms/esx1", false},
		{"POST", "/sds/s1/remove", false},
		{"POST", "/devices/d1/remove", false},
		{"POST", "/mdm/members", false},
		{"POST", "/mdm/leader", false},
		{"POST", "/volumes/v1/snapshot", false},
	} {
		if got := RepeatableRequest(c.method, c.path); got != c.want {
			t.Errorf("RepeatableRequest(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestAnswerLost(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "https://gw:8443/api/v1/sds", Err: err} }
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"bad record MAC", wrap(&net.OpError{Op: "local error", Net: "tcp", Err: errors.New("tls: bad record MAC")}), true},
		{"reset", wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"cut answer", wrap(io.ErrUnexpectedEOF), true},
		{"closed before the answer", wrap(io.EOF), true},
		{"read of the body", fmt.Errorf("read gateway answer: %w", io.ErrUnexpectedEOF), true},
		{"refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), false},
		{"timeout", wrap(&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}), false},
		{"client timeout", wrap(timeoutErr{}), false},
		{"certificate", wrap(x509.UnknownAuthorityError{}), false},
	} {
		if got := AnswerLost(c.err); got != c.want {
			t.Errorf("%s: AnswerLost(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Get", URL: "https://gw:8443/api/v1/sds", Err: err} }
	refused := wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	reset := wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
	for _, c := range []struct {
		method string
		err    error
		want   bool
	}{
		{"POST", refused, true},
		{"GET", refused, true},
		{"GET", reset, true},
		{"GET", fmt.Errorf("read gateway answer: %w", io.ErrUnexpectedEOF), true},
		{"POST", reset, false},
		{"PATCH", wrap(io.EOF), false},
		{"GET", errors.New("gateway answer is not the expected JSON"), false},
	} {
		if got := Unreachable(c.err, c.method); got != c.want {
			t.Errorf("Unreachable(%v, %s) = %v, want %v", c.err, c.method, got, c.want)
		}
	}
}

package contract

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// APIPrefix is the path of the gateway's REST API.
const APIPrefix = "/api/v1"

// idempotentCreates are the collections whose POST create answers 200 and changes
// nothing when repeated with the same spec (docs/api.md, section 3). Users are not
// among them: a taken name is always 409.
var idempotentCreates = map[string]bool{
	"protection-domains": true, "fault-sets": true, "sds": true, "pools": true,
	"devices": true, "volumes": true, "hosts": true,
}

// RepeatableRequest reports whether a gateway API request may be sent again when
// its answer was lost: reads; PATCH and PUT, which set values; and the POSTs the
// API answers 200 on a repeat (a named create, bootstrap, map, unmap, entering
// maintenance). Never a DELETE (a repeat answers 404 for what the first did), a
// login, a one-time token, an upload, an order or a drain. path is the request
// path with or without APIPrefix, its query ignored.
func RepeatableRequest(method, path string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodPut:
		return true
	case http.MethodPost:
	default:
		return false
	}
	path, _, _ = strings.Cut(path, "?")
	path = strings.TrimPrefix(path, APIPrefix)
	p := strings.Split(strings.Trim(path, "/"), "/")
	switch len(p) {
	case 1:
		return idempotentCreates[p[0]]
	case 2:
		return p[0] == "system" && p[1] == "bootstrap"
	case 3:
		switch p[0] + " " + p[2] {
		case "volumes map", "volumes unmap", "sds maintenance", "fault-sets maintenance":
			return true
		}
	}
	return false
}

// neverSent reports whether err is a failed dial: the request never went out.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Unreachable reports whether another gateway of the system may be asked after err:
// the request certainly did not arrive (the connection was never made), or it is a
// read, safe to repeat, and its connection failed in any way.
func Unreachable(err error, method string) bool {
	if neverSent(err) {
		return true
	}
	var ne net.Error
	return method == http.MethodGet && (errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET))
}

// AnswerLost reports whether err, from sending a request or reading its answer,
// means the connection broke after it was made: a reset, a cut answer, a TLS
// record whose MAC does not match. Not a refused dial (the request never went
// out), not a timeout (a slow gateway is not asked twice), not a certificate
// error.
func AnswerLost(err error) bool {
	if neverSent(err) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return !op.Timeout()
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// Acting on behalf of someone: a delegate user (model.User.Delegate, the
// vCenter plugin's service accounts) names the person it authenticated in
// OnBehalfOfHeader; the audit event records both. The header is trusted
// only from delegate users: any other user sending it is refused, so no
// one can put another name into the audit log by setting a header.

package gateway

import (
	"net/http"
	"unicode"
	"unicode/utf8"
)

// OnBehalfOfHeader names the person a delegate user acts for.
const OnBehalfOfHeader = "X-Cairn-On-Behalf-Of"

// maxOnBehalfOf bounds the name (vSphere names are DOMAIN\user or
// user@domain, well under this).
const maxOnBehalfOf = 256

// readOnBehalfOf checks and keeps the header of an authenticated call.
func (c *call) readOnBehalfOf() error {
	vs := c.r.Header.Values(OnBehalfOfHeader)
	if len(vs) == 0 {
		return nil
	}
	if !c.user.Delegate {
		return errorf(http.StatusForbidden, "user %q may not act on behalf of others (%s): only a user created with \"delegate\": true may; send the request without the header, or ask an admin",
			c.user.Name, OnBehalfOfHeader)
	}
	v := vs[0]
	if len(vs) > 1 || v == "" || len(v) > maxOnBehalfOf || !utf8.ValidString(v) {
		return errorf(http.StatusBadRequest, "%s must be one name of 1 to %d bytes (UTF-8)", OnBehalfOfHeader, maxOnBehalfOf)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return errorf(http.StatusBadRequest, "%s must not hold control characters", OnBehalfOfHeader)
		}
	}
	c.onBehalfOf = v
	return nil
}

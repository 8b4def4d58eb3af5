package gateway

import "net/http"

// Security headers, on every response of the gateway (API, errors, 404 and
// 405, /metrics, the event stream). The gateway serves only an API read by
// programs: no page of it is ever rendered or framed (the vSphere Client
// plugin's UI is served by the plugin server, which calls this API from its
// back end), so every policy can be the strictest:
//
//	Strict-Transport-Security  max-age=31536000 (HTTPS only: a browser
//	                           that once reached the gateway over HTTPS never
//	                           tries plain HTTP for a year)
//	Content-Security-Policy    default-src 'none'; frame-ancestors 'none'
//	X-Frame-Options            DENY (frame-ancestors for older browsers)
//	X-Content-Type-Options     nosniff (JSON is never sniffed as HTML)
//	Referrer-Policy            no-referrer
//	Cache-Control              no-store (responses carry tokens and state:
//	                           no proxy or browser cache keeps them)
var securityHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"},
	{"X-Frame-Options", "DENY"},
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "no-referrer"},
	{"Cache-Control", "no-store"},
}

const hstsValue = "max-age=31536000"

// withSecurityHeaders sets securityHeaders (and HSTS on TLS connections)
// before next writes anything; a handler may still override one (none
// does).
func withSecurityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, kv := range securityHeaders {
			h.Set(kv[0], kv[1])
		}
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", hstsValue)
		}
		next.ServeHTTP(w, r)
	})
}

package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
	"strings"
)

// svm record writes what the plugin's expansion writes before it clones an
// SVM: without it, an SVM deployed by other means (Ansible, the installer, by
// hand) and added to a running system is refused by the others' firewalls
// until its own peer sync could record it, which it cannot do from outside.
func init() {
	register(&command{object: "svm", verb: "record", args: "NAME --address IP[,IP...] [--role R[,R...]] [--target-port N]",
		help: "record an SVM before its first boot so the other SVMs admit it (what the plugin's expand does); repeat to change it",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var addrs, roles string
			var port uint
			fs.StringVar(&addrs, "address", "", "the SVM's management and data addresses, comma-separated (1-8)")
			fs.StringVar(&roles, "role", "", "its roles, comma-separated: mdm, tiebreaker, sds, target, gateway")
			fs.UintVar(&port, "target-port", 0, "its relative target port (cairn.target.port_id) when it runs the target role")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the SVM's name (its host name)"); err != nil {
					return err
				}
				if err := required("svm record", map[string]string{"address": addrs}); err != nil {
					return err
				}
				if port > 65535 {
					return usagef("--target-port %d: give 1-65535", port)
				}
				body := map[string]any{"addresses": splitList(addrs), "roles": splitList(roles)}
				if port > 0 {
					body["target_port"] = port
				}
				return s.show(ctx, http.MethodPut, "/svms/"+url.PathEscape(args[0]), body)
			}
		}})
}

// splitList is a comma-separated flag's items, blanks dropped.
func splitList(v string) []string {
	out := []string{}
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

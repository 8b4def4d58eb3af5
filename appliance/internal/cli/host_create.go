package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "host", verb: "create", args: "NAME --type iscsi|nbd [--iqn IQN] [--chap-user U --chap-secret-file F]",
		help: "register a host that volumes can be mapped to",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var typ, iqn, chapUser, chapFile string
			fs.StringVar(&typ, "type", "", "iscsi (ESXi and other iSCSI initiators) or nbd (Linux NBD clients)")
			fs.StringVar(&iqn, "iqn", "", "iSCSI initiator name, e.g. iqn.1998-01.com.vmware:esx01-4c1d2f0a")
			fs.StringVar(&chapUser, "chap-user", "", "CHAP user name (iSCSI)")
			fs.StringVar(&chapFile, "chap-secret-file", "", "file holding the CHAP secret (12-255 characters)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the host's name"); err != nil {
					return err
				}
				if err := required("host create", map[string]string{"type": typ}); err != nil {
					return err
				}
				body := map[string]any{"name": args[0], "type": typ}
				if iqn != "" {
					body["iqn"] = iqn
				}
				if chapUser != "" {
					body["chap_user"] = chapUser
				}
				if chapFile != "" {
					secret, err := readPasswordFile(chapFile)
					if err != nil {
						return err
					}
					body["chap_secret"] = secret
				}
				return s.show(ctx, http.MethodPost, "/hosts", body)
			}
		}})
}

package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "device", verb: "create", args: "[NAME] --sds SDS --pool POOL --path /dev/disk/by-id/... [--force]",
		help: "add a device of an SDS to a pool (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var sds, pool, path string
			var force bool
			fs.StringVar(&sds, "sds", "", "SDS holding the device (name or id)")
			fs.StringVar(&pool, "pool", "", "storage pool (name or id)")
			fs.StringVar(&path, "path", "", "stable path on the SDS: /dev/disk/by-id/..., /dev/disk/by-path/..., or a file")
			fs.BoolVar(&force, "force", false, "accept a kernel name like /dev/sdb (it can change across reboots)")
			return func(ctx context.Context, s *session, args []string) error {
				if len(args) > 1 {
					return usagef("device create: at most one name, got %q", args)
				}
				if err := required("device create", map[string]string{"sds": sds, "pool": pool, "path": path}); err != nil {
					return err
				}
				body := map[string]any{"sds": sds, "pool": pool, "path": path, "force": force}
				if len(args) == 1 {
					body["name"] = args[0]
				}
				return s.show(ctx, http.MethodPost, "/devices", body)
			}
		}})
}

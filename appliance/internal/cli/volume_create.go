package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "volume", verb: "create", args: "NAME --pool POOL --size SIZE [--thick]",
		help: "create a mirrored volume (sizes in whole GiB)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var pool, sizeText string
			var thick bool
			fs.StringVar(&pool, "pool", "", "storage pool (name or id)")
			fs.StringVar(&sizeText, "size", "", "size, a multiple of 1 GiB: 8GiB, 100G, 2T (binary units)")
			fs.BoolVar(&thick, "thick", false, "reserve the whole size in the pool now (default thin: allocate on write)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the volume's name"); err != nil {
					return err
				}
				if err := required("volume create", map[string]string{"pool": pool, "size": sizeText}); err != nil {
					return err
				}
				size, err := parseSize(sizeText)
				if err != nil {
					return usagef("volume create: %v", err)
				}
				return s.show(ctx, http.MethodPost, "/volumes", map[string]any{"name": args[0], "pool": pool, "size": size, "thin": !thick})
			}
		}})
}

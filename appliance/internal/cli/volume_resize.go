package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "volume", verb: "resize", args: "NAME|ID --size SIZE", help: "grow a volume",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var sizeText string
			fs.StringVar(&sizeText, "size", "", "new size, larger than the current one, a multiple of 1 GiB")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the volume's name or id"); err != nil {
					return err
				}
				if err := required("volume resize", map[string]string{"size": sizeText}); err != nil {
					return err
				}
				size, err := parseSize(sizeText)
				if err != nil {
					return usagef("volume resize: %v", err)
				}
				return s.show(ctx, http.MethodPatch, "/volumes/"+url.PathEscape(args[0]), map[string]any{"size": size})
			}
		}})
}

package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
)

func init() {
	register(&command{object: "upgrade", verb: "upload", args: "FILE",
		help: "upload an update bundle (written by `cairn bundle`) for delivery to the SVMs",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the bundle file"); err != nil {
					return err
				}
				data, err := os.ReadFile(args[0])
				if err != nil {
					return err
				}
				if err := s.setup(); err != nil {
					return err
				}
				var raw json.RawMessage
				if err := s.api.call(ctx, http.MethodPost, "/upgrade/bundles", rawRequest{"application/gzip", data}, &raw); err != nil {
					return err
				}
				if s.opts.json {
					return printJSON(s.out, raw)
				}
				var b struct {
					Version, SHA256 string
					Size            int64
				}
				if err := json.Unmarshal(raw, &b); err != nil {
					return fmt.Errorf("gateway answer for /upgrade/bundles: %w", err)
				}
				fmt.Fprintf(s.out, "stored bundle %s (%d bytes, sha256 %s); order it with `cairnctl upgrade order SVM --version %s`\n", b.Version, b.Size, b.SHA256, b.Version)
				return nil
			}
		}})
}

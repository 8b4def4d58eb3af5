package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "device", verb: "create", args: "[NAME] --sds SDS --pool POOL --path /dev/disk/by-id/... [--force] [--no-wait]",
		help: "add a device of an SDS to a pool (admin): its SDS prepares it (a job), then it is shown",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var sds, pool, path string
			var force, noWait bool
			fs.StringVar(&sds, "sds", "", "SDS holding the device (name or id)")
			fs.StringVar(&pool, "pool", "", "storage pool (name or id)")
			fs.StringVar(&path, "path", "", "stable path on the SDS: /dev/disk/by-id/..., /dev/disk/by-path/..., or a file")
			fs.BoolVar(&force, "force", false, "accept a kernel name like /dev/sdb (it can change across reboots)")
			fs.BoolVar(&noWait, "no-wait", false, "print the job and return; follow it with `cairnctl job info ID --wait`")
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
				return s.addDevice(ctx, body, noWait)
			}
		}})
}

// addDevice posts a device and, when the gateway answers with its
// device-add job, follows the job and shows the device it added (a repeat
// of a device already added is answered with the device itself).
func (s *session) addDevice(ctx context.Context, body map[string]any, noWait bool) error {
	if err := s.setup(); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := s.api.call(ctx, http.MethodPost, "/devices", body, &raw); err != nil {
		return err
	}
	var job struct {
		ID     string `json:"id"`
		Kind   string `json:"kind"`
		Object struct {
			ID string `json:"id"`
		} `json:"object"`
	}
	if json.Unmarshal(raw, &job) != nil || job.Kind != "device-add" {
		return s.printAny(raw) // a repeat: the device
	}
	if noWait {
		if s.opts.json {
			return printJSON(s.out, raw)
		}
		fmt.Fprintf(s.out, "adding device %s: job %s (follow it with `cairnctl job info %s --wait`)\n", body["path"], job.ID, job.ID)
		return nil
	}
	if _, err := s.waitJob(ctx, job.ID); err != nil {
		return fmt.Errorf("device create %s: %w", body["path"], err)
	}
	return s.show(ctx, http.MethodGet, "/devices/"+url.PathEscape(job.Object.ID), nil)
}

// printAny prints an object answer as show does.
func (s *session) printAny(raw json.RawMessage) error {
	if s.opts.json {
		return printJSON(s.out, raw)
	}
	return printObject(s.out, raw)
}

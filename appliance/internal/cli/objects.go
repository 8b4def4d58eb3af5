package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// object is one kind of API object as cairnctl shows it.
type object struct {
	name    string // cairnctl noun: volume, pool, ...
	noun    string // in help texts
	path    string // API collection: /volumes
	plural  string
	columns []column
}

func yesNo(key string) func(map[string]any) string {
	return func(o map[string]any) string {
		if o[key] == true {
			return "yes"
		}
		return "no"
	}
}

var objects = []object{
	{name: "pd", noun: "protection domain", path: "/protection-domains", plural: "protection domains", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"FAULT SETS", str("fault_set_count")}, {"SDSS", str("sds_count")}, {"POOLS", str("pool_count")}}},
	{name: "faultset", noun: "fault set", path: "/fault-sets", plural: "fault sets", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"PD", str("protection_domain_name")}, {"SDSS", str("sds_names")}}},
	{name: "sds", noun: "SDS", path: "/sds", plural: "SDSs", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"PD", str("protection_domain_name")}, {"FAULT SET", str("fault_set_name")},
		{"ADDRESS", str("address")}, {"STATE", str("state")},
		{"MAINTENANCE", func(o map[string]any) string { return text(nested(o, "maintenance", "state")) }},
		{"UP", yesNo("up")}, {"DEVICES", str("device_count")},
		{"CAPACITY", size("capacity")}, {"RAW ALLOCATED", size("raw_allocated")}}},
	{name: "device", noun: "device", path: "/devices", plural: "devices", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"SDS", str("sds_name")}, {"POOL", str("pool_name")},
		{"PATH", str("path")}, {"STATE", str("state")}, {"CAPACITY", size("capacity")}, {"RAW ALLOCATED", size("raw_allocated")}}},
	{name: "pool", noun: "pool", path: "/pools", plural: "pools", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"PD", str("protection_domain_name")}, {"SPARE", func(o map[string]any) string { return text(o["spare_percent"]) + "%" }},
		{"DEVICES", str("device_count")}, {"FAULT DOMAINS", str("fault_domain_count")},
		{"RAW", func(o map[string]any) string { return formatBytes(num(nested(o, "capacity", "raw"))) }},
		{"USABLE", func(o map[string]any) string { return formatBytes(num(nested(o, "capacity", "usable"))) }},
		{"ALLOCATED", func(o map[string]any) string { return formatBytes(num(nested(o, "capacity", "allocated"))) }},
		{"FREE", func(o map[string]any) string { return formatBytes(num(nested(o, "capacity", "free"))) }},
		{"VOLUMES", str("volume_count")}}},
	{name: "volume", noun: "volume", path: "/volumes", plural: "volumes", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"POOL", str("pool_name")}, {"SIZE", size("size")}, {"ALLOCATED", size("allocated")},
		{"TYPE", func(o map[string]any) string {
			if o["thin"] == true {
				return "thin"
			}
			return "thick"
		}},
		{"WWN", str("wwn")},
		{"MAPPED TO", func(o map[string]any) string {
			var hosts []string
			ms, _ := o["mappings"].([]any)
			for _, m := range ms {
				mm, _ := m.(map[string]any)
				hosts = append(hosts, text(mm["host_name"])+" (LUN "+text(mm["lun"])+")")
			}
			return strings.Join(hosts, ",")
		}}}},
	{name: "host", noun: "host", path: "/hosts", plural: "hosts", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"TYPE", str("type")}, {"IQN", str("iqn")}, {"CHAP", yesNo("chap")}, {"VOLUMES", str("volume_names")}}},
	{name: "user", noun: "user", path: "/users", plural: "users", columns: []column{{"NAME", str("name")}, {"ROLE", str("role")}}},
	{name: "svm", noun: "SVM record", path: "/svms", plural: "SVM records (the SVMs every SVM's firewall admits)", columns: []column{
		{"NAME", str("name")}, {"ADDRESSES", str("addresses")}, {"ROLES", str("roles")}, {"TARGET PORT", str("target_port")}}},
}

func objectNamed(name string) object {
	for _, o := range objects {
		if o.name == name {
			return o
		}
	}
	panic("cli: unknown object " + name)
}

// The verbs every object has: ls, info, rm.
func init() {
	for _, o := range objects {
		o := o
		register(&command{object: o.name, verb: "ls", args: "", help: "list " + o.plural,
			setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
				return func(ctx context.Context, s *session, args []string) error {
					if err := needArgs(args, 0, "no arguments"); err != nil {
						return err
					}
					return s.list(ctx, o)
				}
			}})
		register(&command{object: o.name, verb: "info", args: "NAME|ID", help: "show one " + o.noun,
			setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
				return func(ctx context.Context, s *session, args []string) error {
					if err := needArgs(args, 1, "the "+o.noun+"'s name or id"); err != nil {
						return err
					}
					return s.show(ctx, http.MethodGet, o.path+"/"+url.PathEscape(args[0]), nil)
				}
			}})
		drainable := o.name == "sds" || o.name == "device"
		rmArgs, rmHelp := "NAME|ID...", "delete "+o.plural
		if drainable {
			rmArgs, rmHelp = "[--drain [--no-wait]] NAME|ID...", "delete "+o.plural+"; --drain first moves their data to the others (a job with progress)"
		}
		register(&command{object: o.name, verb: "rm", args: rmArgs, help: rmHelp,
			setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
				var drain, noWait bool
				if drainable {
					fs.BoolVar(&drain, "drain", false, "move the data off first (rebalance), then remove; shows progress")
					fs.BoolVar(&noWait, "no-wait", false, "with --drain: start the job and return (follow it with `cairnctl job info ID --wait`)")
				}
				return func(ctx context.Context, s *session, args []string) error {
					if len(args) == 0 {
						return usagef("give the name or id of the %s to delete", o.noun)
					}
					if err := s.setup(); err != nil {
						return err
					}
					if drain {
						return s.drainRemove(ctx, o, args, !noWait)
					}
					for _, a := range args {
						if err := s.api.call(ctx, http.MethodDelete, o.path+"/"+url.PathEscape(a), nil, nil); err != nil {
							return fmt.Errorf("%s rm %s: %w", o.name, a, err)
						}
						if !s.opts.json {
							fmt.Fprintf(s.out, "deleted %s %s\n", o.name, a)
						}
					}
					return nil
				}
			}})
	}
}

// list prints a collection as a table or JSON.
func (s *session) list(ctx context.Context, o object) error { return s.listAt(ctx, o.path, o.columns) }

// show sends a request and prints the object it returns.
func (s *session) show(ctx context.Context, method, path string, body any) error {
	if err := s.setup(); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := s.api.call(ctx, method, path, body, &raw); err != nil {
		return err
	}
	return s.printAny(raw)
}

// drainRemove starts the drain-and-remove job of each object and, with
// wait, follows each to its end.
func (s *session) drainRemove(ctx context.Context, o object, refs []string, wait bool) error {
	for _, a := range refs {
		var job struct {
			ID string `json:"id"`
		}
		var raw json.RawMessage
		if err := s.api.call(ctx, http.MethodPost, o.path+"/"+url.PathEscape(a)+"/remove", nil, &raw); err != nil {
			return fmt.Errorf("%s rm --drain %s: %w", o.name, a, err)
		}
		if err := json.Unmarshal(raw, &job); err != nil || job.ID == "" {
			return fmt.Errorf("%s rm --drain %s: the gateway answered no job: %s", o.name, a, raw)
		}
		if !wait {
			if s.opts.json {
				if err := printJSON(s.out, raw); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(s.out, "draining %s %s: job %s (follow it with `cairnctl job info %s --wait`)\n", o.name, a, job.ID, job.ID)
			continue
		}
		if err := s.followJob(ctx, job.ID); err != nil {
			return fmt.Errorf("%s rm --drain %s: %w", o.name, a, err)
		}
	}
	return nil
}

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
	{name: "pd", noun: "protection domain", path: "/pds", plural: "protection domains", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"FAULT SETS", str("fault_sets")}, {"SDSS", str("sdss")}, {"POOLS", str("pools")}}},
	{name: "faultset", noun: "fault set", path: "/faultsets", plural: "fault sets", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"PD", str("pd_name")}, {"SDSS", str("sdss")}}},
	{name: "sds", noun: "SDS", path: "/sds", plural: "SDSs", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"PD", str("pd_name")}, {"FAULT SET", str("fault_set_name")},
		{"ADDRESS", str("address")}, {"STATE", str("state")},
		{"MAINTENANCE", func(o map[string]any) string { return text(nested(o, "maintenance", "state")) }},
		{"UP", yesNo("up")}, {"DEVICES", str("devices")},
		{"CAPACITY", size("capacity")}, {"USED", size("used")}}},
	{name: "device", noun: "device", path: "/devices", plural: "devices", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"SDS", str("sds_name")}, {"POOL", str("pool_name")},
		{"PATH", str("path")}, {"STATE", str("state")}, {"CAPACITY", size("capacity")}, {"USED", size("used")}}},
	{name: "pool", noun: "pool", path: "/pools", plural: "pools", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"PD", str("pd_name")}, {"SPARE", func(o map[string]any) string { return text(o["spare_percent"]) + "%" }},
		{"DEVICES", func(o map[string]any) string { return text(nested(o, "capacity", "devices")) }},
		{"FAULT DOMAINS", func(o map[string]any) string { return text(nested(o, "capacity", "fault_domains")) }},
		{"RAW", func(o map[string]any) string { return formatBytes(num(nested(o, "capacity", "raw"))) }},
		{"USABLE", func(o map[string]any) string { return formatBytes(num(nested(o, "capacity", "usable"))) }},
		{"USED", size("used")}, {"VOLUMES", str("volumes")}}},
	{name: "volume", noun: "volume", path: "/volumes", plural: "volumes", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"POOL", str("pool_name")}, {"SIZE", size("size")},
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
				hosts = append(hosts, text(mm["host_name"]))
			}
			return strings.Join(hosts, ",")
		}}}},
	{name: "host", noun: "host", path: "/hosts", plural: "hosts", columns: []column{
		{"NAME", str("name")}, {"ID", str("id")}, {"TYPE", str("type")}, {"IQN", str("iqn")}, {"CHAP", yesNo("chap")}, {"VOLUMES", str("volumes")}}},
	{name: "user", noun: "user", path: "/users", plural: "users", columns: []column{{"NAME", str("name")}, {"ROLE", str("role")}}},
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
		register(&command{object: o.name, verb: "rm", args: "NAME|ID...", help: "delete " + o.plural,
			setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
				return func(ctx context.Context, s *session, args []string) error {
					if len(args) == 0 {
						return usagef("give the name or id of the %s to delete", o.noun)
					}
					if err := s.setup(); err != nil {
						return err
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
func (s *session) list(ctx context.Context, o object) error {
	if err := s.setup(); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := s.api.call(ctx, http.MethodGet, o.path, nil, &raw); err != nil {
		return err
	}
	if s.opts.json {
		return printJSON(s.out, raw)
	}
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		return fmt.Errorf("gateway answer for %s is not a list: %w", o.path, err)
	}
	printTable(s.out, o.columns, rows)
	return nil
}

// show sends a request and prints the object it returns.
func (s *session) show(ctx context.Context, method, path string, body any) error {
	if err := s.setup(); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := s.api.call(ctx, method, path, body, &raw); err != nil {
		return err
	}
	if s.opts.json {
		return printJSON(s.out, raw)
	}
	return printObject(s.out, raw)
}

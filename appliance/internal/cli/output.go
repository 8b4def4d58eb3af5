package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// column of a table: a header and how to render it from an API object.
type column struct {
	header string
	value  func(obj map[string]any) string
}

// str renders a field as text.
func str(key string) func(map[string]any) string {
	return func(o map[string]any) string { return text(o[key]) }
}

// size renders a byte count field.
func size(key string) func(map[string]any) string {
	return func(o map[string]any) string { return formatBytes(num(o[key])) }
}

func nested(o map[string]any, keys ...string) any {
	var cur any = o
	for _, k := range keys {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	return cur
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, text(e))
		}
		return strings.Join(parts, ",")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// formatBytes renders bytes in binary units with up to one decimal.
func formatBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for math.Abs(b) >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if b == math.Trunc(b) {
		return fmt.Sprintf("%.0f %s", b, units[i])
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

// parseSize reads sizes like 8GiB, 8G, 8g, 512MiB, 1.5T or plain bytes.
// K, M, G, T, P are binary (1024-based) with or without "i"/"iB"/"B",
// as storage admins use them for volume sizes.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	numPart, unit := t, ""
	if i >= 0 {
		numPart, unit = t[:i], strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(numPart, 64)
	if err != nil || numPart == "" || v < 0 {
		return 0, fmt.Errorf("size %q: give a number with a unit, e.g. 8GiB, 512G, 2TiB", s)
	}
	u := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "b"))
	u = strings.TrimSuffix(strings.TrimSuffix(u, "I"), "i")
	mult := map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
	m, ok := mult[u]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q; use K, M, G, T or P (binary: 1G = 1 GiB)", s, unit)
	}
	r := v * m
	if r > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(r)), nil
}

func printTable(w io.Writer, cols []column, rows []map[string]any) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c.header)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c.value(r))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printJSON prints an API answer indented.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// printObject prints one object as "field: value" lines in the API's field
// order, with sizes made readable.
func printObject(w io.Writer, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return printJSON(w, raw)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s:\t%s\n", key, renderField(key, v))
	}
	return tw.Flush()
}

var sizeKeys = map[string]bool{"size": true, "capacity": true, "raw": true, "usable": true, "thick_reserved": true,
	"raw_allocated": true, "allocated": true, "free": true, "spare_reserved": true, "thin_provisioned": true}

func renderField(key string, v any) string {
	switch x := v.(type) {
	case float64:
		if sizeKeys[key] {
			return fmt.Sprintf("%s (%s bytes)", formatBytes(x), strconv.FormatFloat(x, 'f', -1, 64))
		}
	case map[string]any:
		// Nested objects (capacity, io, health): key=value pairs.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			val := text(x[k])
			if f, ok := x[k].(float64); ok && sizeKeys[k] {
				val = strings.ReplaceAll(formatBytes(f), " ", "")
			}
			parts = append(parts, k+"="+val)
		}
		return strings.Join(parts, " ")
	case []any:
		if key == "mappings" {
			parts := make([]string, 0, len(x))
			for _, e := range x {
				m, _ := e.(map[string]any)
				mode := "rw"
				if m["read_only"] == true {
					mode = "ro"
				}
				parts = append(parts, fmt.Sprintf("%s (%s)", text(m["host_name"]), mode))
			}
			return strings.Join(parts, ", ")
		}
	}
	if sizeKeys[key] {
		return formatBytes(num(v))
	}
	return text(v)
}

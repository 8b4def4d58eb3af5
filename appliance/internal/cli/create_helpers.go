package cli

import (
	"encoding/json"
	"io"
)

// printJSONValue prints a Go value as indented JSON.
func printJSONValue(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return printJSON(w, b)
}

// required returns a usage error naming the missing flags.
func required(cmd string, flags map[string]string) error {
	for _, name := range []string{"pd", "pool", "sds", "size", "path", "type", "role", "host", "address"} {
		if v, ok := flags[name]; ok && v == "" {
			return usagef("%s: give --%s", cmd, name)
		}
	}
	return nil
}

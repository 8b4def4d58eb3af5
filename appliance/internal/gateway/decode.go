package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// decodeJSON reads one JSON object from body into v (a pointer to a struct):
// at most maxBody bytes, unknown fields refused, nothing after the object.
// Its errors say where the body is wrong and are meant for the user.
func decodeJSON(body io.Reader, v any) error {
	data, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	var mbe *http.MaxBytesError
	if err != nil && !errors.As(err, &mbe) {
		return fmt.Errorf("read request body: %w", err)
	}
	if len(data) > maxBody || mbe != nil {
		return fmt.Errorf("request body is larger than %d bytes (1 MiB)", maxBody)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return errors.New("request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("request body must be a JSON object ({...}); it starts with %q", firstRune(trimmed))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(data, err, v)
	}
	if _, err := dec.Token(); err != io.EOF {
		at := dec.InputOffset()
		return fmt.Errorf("unexpected data after the JSON object at %s; send exactly one object", position(data, at))
	}
	return nil
}

func firstRune(b []byte) string {
	s := string(b)
	for _, r := range s {
		return string(r)
	}
	return ""
}

// position renders a byte offset as "line L, column C (byte N)".
func position(data []byte, off int64) string {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d (byte %d)", line, col, off)
}

func describeJSONError(data []byte, err error, v any) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the offending byte itself; point at it.
		return fmt.Errorf("malformed JSON at %s: %s", position(data, max(se.Offset-1, 0)), strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return model.WithField(fmt.Errorf("field %q at %s: expected %s, got JSON %s", field, position(data, te.Offset), jsonKind(te.Type), te.Value), te.Field)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("malformed JSON: the body ends early at %s (unclosed object, array or string)", position(data, int64(len(data))))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return model.WithField(fmt.Errorf("unknown field %s; this request accepts: %s", name, strings.Join(jsonFields(v), ", ")), strings.Trim(name, `"`))
	}
	return fmt.Errorf("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// jsonFields lists the JSON field names of the struct v points to.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		// An embedded struct without a json name has its fields promoted,
		// as encoding/json does (also when its type is unexported).
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(reflect.New(f.Type).Interface())...)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Error codes of the API (docs/api.md, section 2).
const (
	CodeInvalid       = "invalid"
	CodeNoChange      = "no_change"
	CodeUnauthorized  = "unauthorized"
	CodeForbidden     = "forbidden"
	CodeNotFound      = "not_found"
	CodeAlreadyExists = "already_exists"
	CodeInUse         = "in_use"
	CodeConflict      = "conflict"
	CodeUnavailable   = "unavailable"
	CodeInternal      = "internal"
)

// errorBody is every error response: {"code", "message", "field"}.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code": "internal", "message": "internal error: encode response", "field": ""}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Code: code, Message: msg})
}

// apiError is an error with its HTTP status and code (code "" derives it
// from the status).
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, a ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, a...)}
}

var codeOfStatus = map[int]string{
	http.StatusBadRequest: CodeInvalid, http.StatusUnauthorized: CodeUnauthorized, http.StatusForbidden: CodeForbidden,
	http.StatusNotFound: CodeNotFound, http.StatusConflict: CodeConflict, http.StatusPreconditionFailed: CodeConflict,
	http.StatusServiceUnavailable: CodeUnavailable, http.StatusMethodNotAllowed: CodeInvalid,
}

// classify maps an error to its HTTP status and API code: model sentinels
// first, then the gateway's own apiError; anything else is internal.
func classify(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		code := ae.code
		if code == "" {
			code = codeOfStatus[ae.status]
		}
		if code == "" {
			code = CodeInternal
		}
		return ae.status, code
	case errors.Is(err, model.ErrInvalid):
		return http.StatusBadRequest, CodeInvalid
	case errors.Is(err, model.ErrNoChange):
		return http.StatusBadRequest, CodeNoChange
	case errors.Is(err, model.ErrBadCredentials):
		return http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, model.ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, model.ErrExists):
		return http.StatusConflict, CodeAlreadyExists
	case errors.Is(err, model.ErrInUse):
		return http.StatusConflict, CodeInUse
	case errors.Is(err, model.ErrPrecondition):
		return http.StatusPreconditionFailed, CodeConflict
	case errors.Is(err, model.ErrConflict):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, model.ErrUnavailable):
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

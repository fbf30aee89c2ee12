package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/writhq/writ"
)

// errUnsupportedMediaType marks a request body that is not JSON (415).
var errUnsupportedMediaType = writ.Errorf(writ.EINVALID, "Content-Type must be application/json")

// readJSONBody reads a request body of at most limit bytes after checking
// that it is declared as JSON. A body over the limit is an ETOOLARGE error;
// a body of another media type is errUnsupportedMediaType.
func readJSONBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != mediaJSON {
		return nil, errUnsupportedMediaType
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return nil, errUnsupportedMediaType
	}
	tooLarge := writ.Errorf(writ.ETOOLARGE, "request body exceeds %d bytes", limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return nil, tooLarge
	} else if err != nil {
		return nil, writ.Errorf(writ.EINVALID, "cannot read request body: %v", err)
	}
	return body, nil
}

// decodeStrict decodes body, which must hold exactly one JSON object, into
// v (a pointer to a struct). Before decoding, the body's shape is checked
// against v's type so that every problem is reported with its JSON path:
// unknown fields (names match json tags exactly, case included), values of
// the wrong type, and duplicate object members (ambiguous JSON that
// parsers disagree on; RFC 8785 requires I-JSON). Problems with the body
// are EINVALID; any other error is a bug.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return writ.Errorf(writ.EINVALID, "request body is empty; it must be a JSON object")
	}
	if err := checkSingleValue(body); err != nil {
		return err
	}
	details, err := checkShape(body, reflect.TypeOf(v).Elem())
	if err != nil {
		return err // a bug: internal
	}
	if len(details) > 0 {
		return &writ.Error{Code: writ.EINVALID, Message: "request body does not match the expected schema", Details: details}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// checkShape accepts only what Decode accepts; this is a safety net.
		return writ.Errorf(writ.EINVALID, "request body does not match the expected schema: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// checkSingleValue checks that body is well-formed JSON holding exactly
// one value, and says where it is not.
func checkSingleValue(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return syntaxError(body, err)
	}
	end := int(dec.InputOffset())
	rest := bytes.TrimLeft(body[end:], " \t\r\n")
	if len(rest) > 0 {
		off := len(body) - len(rest)
		return writ.Errorf(writ.EINVALID, "request body must hold a single JSON value; unexpected data after it at %s", position(body, off))
	}
	return nil
}

// syntaxError describes a decoding error of malformed JSON.
func syntaxError(body []byte, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read, the offending one included.
		return writ.Errorf(writ.EINVALID, "malformed JSON at %s: %s", position(body, int(se.Offset)-1), se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return writ.Errorf(writ.EINVALID, "malformed JSON: the body ends in the middle of a value (at %s)", position(body, len(body)))
	}
	return writ.Errorf(writ.EINVALID, "malformed JSON: %s", err.Error())
}

// position renders the 0-based byte offset off as a 1-based line and
// column, and the offset.
func position(body []byte, off int) string {
	off = min(max(off, 0), len(body))
	line := 1 + bytes.Count(body[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(body[:off], '\n')
	return fmt.Sprintf("line %d, column %d (byte offset %d)", line, col, off)
}

// maxShapeDetails caps the problems one request reports.
const maxShapeDetails = 20

var timeType = reflect.TypeFor[time.Time]()

// checkShape walks well-formed JSON against the Go type t and lists what
// encoding/json would reject (or silently accept) in strict decoding:
// unknown fields, wrong types, duplicate members. The root must be an
// object. An error means a bug: body was not checked by checkSingleValue,
// or t holds a kind checkShape does not know.
func checkShape(body []byte, t reflect.Type) ([]writ.Detail, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	c := &shapeChecker{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return []writ.Detail{{Message: "request body must be a JSON object, not " + jsonKind(tok)}}, nil
	}
	if err := c.object("", t, true); err != nil {
		return nil, err
	}
	return c.details, nil
}

// shapeChecker holds the state of one checkShape walk. Shape problems are
// collected in details; its methods return an error only for a bug (see
// checkShape).
type shapeChecker struct {
	dec     *json.Decoder
	details []writ.Detail
}

func (c *shapeChecker) report(path, format string, args ...any) {
	if len(c.details) < maxShapeDetails {
		c.details = append(c.details, writ.Detail{Field: path, Message: fmt.Sprintf(format, args...)})
	}
}

// value checks the next value against t.
func (c *shapeChecker) value(path string, t reflect.Type) error {
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if tok == nil {
		return nil // null leaves the Go zero value, for every type
	}
	delim, isDelim := tok.(json.Delim)
	want, ok := "", false
	switch {
	case t == timeType:
		s, isString := tok.(string)
		if ok = isString; ok {
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				c.report(path, "must be an RFC 3339 date-time, such as 2026-05-09T09:31:42Z")
			}
		}
		want = "an RFC 3339 date-time string"
	case t.Kind() == reflect.Interface:
		return c.anyValue(path, tok)
	case t.Kind() == reflect.Struct:
		if ok = isDelim && delim == '{'; ok {
			return c.object(path, t, true)
		}
		want = "an object"
	case t.Kind() == reflect.Map:
		if ok = isDelim && delim == '{'; ok {
			return c.object(path, t.Elem(), false)
		}
		want = "an object"
	case t.Kind() == reflect.Slice:
		if ok = isDelim && delim == '['; ok {
			return c.array(path, t.Elem())
		}
		want = "an array"
	case t.Kind() == reflect.String:
		_, ok = tok.(string)
		want = "a string"
	case t.Kind() == reflect.Bool:
		_, ok = tok.(bool)
		want = "a boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, isNumber := tok.(json.Number)
		if ok = isNumber; ok {
			if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
				c.report(path, "must be an integer that fits in %d bits, not %s", t.Bits(), n)
			}
		}
		want = "an integer"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		n, isNumber := tok.(json.Number)
		if ok = isNumber; ok {
			if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
				c.report(path, "must be a non-negative integer that fits in %d bits, not %s", t.Bits(), n)
			}
		}
		want = "a non-negative integer"
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		n, isNumber := tok.(json.Number)
		if ok = isNumber; ok {
			if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
				c.report(path, "number %s is out of range", n)
			}
		}
		want = "a number"
	default:
		return fmt.Errorf("httpapi: checkShape does not support %s", t)
	}
	if !ok {
		c.report(path, "must be %s, not %s", want, jsonKind(tok))
		if isDelim {
			return c.skipRest()
		}
	}
	return nil
}

// object checks the members of an object whose '{' was read. For a struct
// (isStruct), members are matched against json tags; for a map, every
// member is checked against the element type t.
func (c *shapeChecker) object(path string, t reflect.Type, isStruct bool) error {
	var fields map[string]reflect.Type
	if isStruct {
		fields = jsonFields(t)
	}
	seen := make(map[string]bool)
	for c.dec.More() {
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string) // object keys are always strings
		p := joinPath(path, name)
		if seen[name] {
			c.report(p, "duplicate field")
		}
		seen[name] = true
		ft := t
		if isStruct {
			var known bool
			if ft, known = fields[name]; !known {
				c.report(p, "unknown field")
				if err := c.skipValue(); err != nil {
					return err
				}
				continue
			}
		}
		if err := c.value(p, ft); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // '}'
	return err
}

// array checks the elements of an array whose '[' was read.
func (c *shapeChecker) array(path string, elem reflect.Type) error {
	for i := 0; c.dec.More(); i++ {
		if err := c.value(fmt.Sprintf("%s[%d]", path, i), elem); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // ']'
	return err
}

// anyValue checks a free-form value (decoded into any) whose first token
// was read: any JSON is accepted, but members must not repeat.
func (c *shapeChecker) anyValue(path string, tok json.Token) error {
	switch tok {
	case json.Delim('{'):
		return c.object(path, reflect.TypeFor[any](), false)
	case json.Delim('['):
		return c.array(path, reflect.TypeFor[any]())
	}
	return nil
}

// skipValue consumes the next value.
func (c *shapeChecker) skipValue() error {
	var raw json.RawMessage
	return c.dec.Decode(&raw)
}

// skipRest consumes the rest of an object or array whose opening
// delimiter was read.
func (c *shapeChecker) skipRest() error {
	for depth := 1; depth > 0; {
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// jsonFields maps the json names of t's exported fields to their types.
// writ's request types have no embedded structs.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonKind names the kind of the JSON value that starts with tok.
func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// DecodeCheckRequest decodes a check request exactly as POST /v1/check
// does: one JSON object, no unknown or duplicate fields, every value of
// the right type. Other faces (the CLI, tests) use it to accept the same
// bodies the server accepts.
func DecodeCheckRequest(body []byte) (*writ.CheckRequest, error) {
	var req writ.CheckRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

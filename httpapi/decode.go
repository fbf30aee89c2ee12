package httpapi

import (
	"bytes"
	"cmp"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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

// decodeOptions make unmarshaling strict. JSON v2 already rejects
// duplicate object members (ambiguous JSON that parsers disagree on; RFC
// 8785 requires I-JSON), invalid UTF-8 and trailing data, and matches
// member names exactly, case included; unknown members are rejected too.
//
// The unmarshaler below holds three more rules no struct tag can say:
// null is refused wherever a type is not nullable (the OpenAPI document
// declares no member nullable; only a free-form value, such as an
// argument, may hold null); a number must lie within ±(2^53-1); a date-time
// must lie in the window writ accepts.
var decodeOptions = json.JoinOptions(json.RejectUnknownMembers(true), json.WithUnmarshalers(json.UnmarshalFromFunc(strictValue)))

// maxExactInteger is 2^53-1 (JavaScript's Number.MAX_SAFE_INTEGER):
// every integer up to it in magnitude is exact as an IEEE 754 double,
// which is what a JSON number is in a record's canonical form (RFC 8785
// serializes numbers as doubles), and no other integer rounds to it. A
// larger one may be rounded (9007199254740993 stored as …992), so it is
// refused: send it as a string.
const maxExactInteger = 1<<53 - 1

// The window of the date-times a request may carry: a report's
// started_at in year 0001 or an ended_at in 9999 is a bug of its sender,
// never a time something happened.
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) // exclusive
)

// valueError is a problem strictValue found with a JSON value; its message
// goes into the detail that names the member.
type valueError struct{ msg string }

func (e *valueError) Error() string { return e.msg }

// strictValue is called for every value decoded into v. It refuses null
// where v is not free-form, numbers beyond ±(2^53-1) and date-times outside
// the window, and leaves everything else (errors.ErrUnsupported) to the
// default decoding.
func strictValue(dec *jsontext.Decoder, v any) error {
	switch kind := dec.PeekKind(); {
	case kind == 'n':
		if _, ok := v.(*any); ok {
			return errors.ErrUnsupported // null is a value of free-form data
		}
		return &valueError{"must not be null; leave the member out instead"}
	case kind == '0':
		switch p := v.(type) {
		case *any:
			f, err := readNumber(dec)
			if err == nil {
				*p = f
			}
			return err
		case *float64:
			f, err := readNumber(dec)
			if err == nil {
				*p = f
			}
			return err
		}
	case kind == '"':
		if p, ok := v.(*time.Time); ok {
			raw, err := dec.ReadValue()
			if err != nil {
				return err
			}
			var t time.Time
			if err := json.Unmarshal(raw, &t); err != nil {
				return &valueError{"must be an RFC 3339 date-time, such as 2026-05-09T09:31:42Z"}
			}
			if t.Before(minTime) || !t.Before(maxTime) {
				return &valueError{fmt.Sprintf("date-time %s is outside the window writ accepts (from %s, before %s)",
					raw, minTime.Format(time.RFC3339), maxTime.Format(time.RFC3339))}
			}
			*p = t
			return nil
		}
	}
	return errors.ErrUnsupported
}

// readNumber reads a JSON number that must lie within ±(2^53-1).
func readNumber(dec *jsontext.Decoder) (float64, error) {
	raw, err := dec.ReadValue()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.Abs(f) > maxExactInteger {
		return 0, &valueError{fmt.Sprintf("number %s is beyond ±9007199254740991 (2^53-1), the largest magnitude writ keeps exactly; send it as a string", raw)}
	}
	return f, nil
}

// msgSchema is the message of an error that says what in a body does not
// match the expected schema; its details name the path.
const msgSchema = "request body does not match the expected schema"

// decodeStrict decodes body, which must hold exactly one JSON object, into
// v (a pointer to a struct): no unknown or duplicate members, every value
// of the right type. A problem is reported with its JSON path (or, for
// malformed JSON, its position). Problems with the body are EINVALID; any
// other error is a bug.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return writ.Errorf(writ.EINVALID, "request body is empty; it must be a JSON object")
	}
	// JSON v2 would decode null into a struct; only an object will do.
	if value := bytes.TrimLeft(body, " \t\r\n"); value[0] != '{' {
		if err := checkSingleValue(body); err != nil {
			return err
		}
		return &writ.Error{Code: writ.EINVALID, Message: msgSchema, Details: []writ.Detail{
			{Message: "request body must be a JSON object, not " + jsonKind(jsontext.Value(value).Kind())}}}
	}
	err := json.Unmarshal(body, v, decodeOptions)
	if err == nil {
		if c, ok := v.(requiredMembers); ok {
			return c.checkRequired()
		}
		return nil
	}
	// JSON v2 stops at the first problem, but malformed JSON anywhere
	// in the body is what the caller must fix first.
	if err := checkSingleValue(body); err != nil {
		return err
	}
	return schemaError(body, err)
}

// requiredMembers is a body with a member the API requires that decoding
// alone cannot insist on: a pointer left out decodes as nil, and encodes
// again as the null the decoder refuses.
type requiredMembers interface {
	checkRequired() error
}

// checkSingleValue checks that body is well-formed JSON holding exactly
// one value, and says where it is not. It uses encoding/json, which
// places syntax errors at the offending byte.
func checkSingleValue(body []byte) error {
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	var first stdjson.RawMessage
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
	var se *stdjson.SyntaxError
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

var timeType = reflect.TypeFor[time.Time]()

// schemaError turns an error of json.Unmarshal on well-formed body into
// an EINVALID error whose detail names the path of the problem. An error
// it cannot explain is a bug, returned as is.
func schemaError(body []byte, err error) error {
	var (
		syn *jsontext.SyntacticError
		sem *json.SemanticError
		d   writ.Detail
	)
	switch {
	case errors.As(err, &sem) && errors.As(err, new(*valueError)):
		var ve *valueError
		errors.As(err, &ve)
		d = writ.Detail{Field: fieldPath(body, sem.JSONPointer), Message: ve.msg}
	case errors.As(err, &syn) && errors.Is(err, jsontext.ErrDuplicateName):
		d = writ.Detail{Field: fieldPath(body, syn.JSONPointer), Message: "duplicate field"}
	case errors.As(err, &syn):
		// What encoding/json accepts and JSON v2 does not: invalid UTF-8.
		return writ.Errorf(writ.EINVALID, "malformed JSON at %s: %s", position(body, int(syn.ByteOffset)), syn.Err)
	case errors.As(err, &sem) && errors.Is(err, json.ErrUnknownName):
		d = writ.Detail{Field: fieldPath(body, sem.JSONPointer), Message: "unknown field"}
	case errors.As(err, &sem):
		msg, ok := valueProblem(sem)
		if !ok {
			return fmt.Errorf("httpapi: decoding the request body: %w", err)
		}
		d = writ.Detail{Field: fieldPath(body, sem.JSONPointer), Message: msg}
	default:
		return fmt.Errorf("httpapi: decoding the request body: %w", err)
	}
	return &writ.Error{Code: writ.EINVALID, Message: msgSchema, Details: []writ.Detail{d}}
}

// valueProblem says what is wrong with a JSON value that e reports could
// not be unmarshaled into a Go value: its kind, or its value. It reports
// false for a Go type that writ's request types do not use.
func valueProblem(e *json.SemanticError) (string, bool) {
	t := e.GoType
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "", false
	}
	var (
		want     string        // the JSON the Go type takes
		wantKind jsontext.Kind // its kind
		problem  string        // what is wrong with a value of that kind
	)
	switch k := t.Kind(); {
	case t == timeType:
		want, wantKind = "an RFC 3339 date-time string", '"'
		problem = "must be an RFC 3339 date-time, such as 2026-05-09T09:31:42Z"
	case k == reflect.Struct || k == reflect.Map:
		want, wantKind = "an object", '{'
	case k == reflect.Slice:
		want, wantKind = "an array", '['
	case k == reflect.String:
		want, wantKind = "a string", '"'
	case k == reflect.Bool:
		want, wantKind = "a boolean", 't'
	case k >= reflect.Int && k <= reflect.Int64:
		want, wantKind = "an integer", '0'
		problem = fmt.Sprintf("must be an integer that fits in %d bits, not %s", t.Bits(), e.JSONValue)
	case k >= reflect.Uint && k <= reflect.Uint64:
		want, wantKind = "a non-negative integer", '0'
		problem = fmt.Sprintf("must be a non-negative integer that fits in %d bits, not %s", t.Bits(), e.JSONValue)
	case k == reflect.Float64 || k == reflect.Float32:
		want, wantKind = "a number", '0'
		problem = fmt.Sprintf("number %s is out of range", e.JSONValue)
	default:
		return "", false
	}
	got := e.JSONKind
	if got == 'f' {
		got = 't'
	}
	switch {
	case got != wantKind:
		return "must be " + want + ", not " + jsonKind(e.JSONKind), true
	case problem != "":
		return problem, true
	}
	return "", false
}

// fieldPath renders ptr, a JSON Pointer into body, as a path in the style
// of writ's details: member names joined by dots, array indexes in
// brackets (evidence[1].bogus). Whether a token is an index is read from
// body; should body not hold the path, the rest is taken as names.
func fieldPath(body []byte, ptr jsontext.Pointer) string {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var path strings.Builder
	for name := range ptr.Tokens() {
		isIndex := dec != nil && dec.PeekKind() == '['
		if dec != nil && descend(dec, name) != nil {
			dec = nil
		}
		switch {
		case isIndex:
			path.WriteString("[" + name + "]")
		case path.Len() > 0:
			path.WriteString("." + name)
		default:
			path.WriteString(name)
		}
	}
	return path.String()
}

// descend reads dec up to the value of the member or element name of the
// object or array that comes next.
func descend(dec *jsontext.Decoder, name string) error {
	open, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch open.Kind() {
	case '[':
		n, err := strconv.Atoi(name)
		for i := 0; err == nil && i < n; i++ {
			err = dec.SkipValue()
		}
		return err
	case '{':
		for {
			tok, err := dec.ReadToken()
			if err != nil || tok.Kind() != '"' {
				return cmp.Or(err, errors.New("no such member"))
			}
			if tok.String() == name {
				return nil
			}
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	return errors.New("not an object or array")
}

// jsonKind names a JSON kind.
func jsonKind(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "invalid JSON"
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

package verify

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// recordHead reads the few top-level members verification needs from a
// stored record (record_id, tenant_id, timestamp), skipping the rest with
// a streaming tokenizer instead of decoding the whole record.
func recordHead(raw []byte) (recordID, tenantID string, ts time.Time, err error) {
	// Duplicate names need no tracking here: any change to a sealed
	// record's bytes breaks its hash.
	d := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	tok, err := d.ReadToken()
	if err != nil {
		return "", "", ts, err
	}
	if tok.Kind() != '{' {
		return "", "", ts, errors.New("the record is not a JSON object")
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return "", "", ts, err
		}
		name := tok.String() // copy: the token dies with the next read
		switch name {
		case "record_id", "tenant_id", "timestamp":
			v, err := d.ReadToken()
			if err != nil {
				return "", "", ts, err
			}
			if v.Kind() != '"' {
				return "", "", ts, fmt.Errorf("%s is not a string", name)
			}
			switch name {
			case "record_id":
				recordID = v.String()
			case "tenant_id":
				tenantID = v.String()
			default:
				if ts, err = time.Parse(time.RFC3339Nano, v.String()); err != nil {
					return "", "", ts, fmt.Errorf("timestamp: %w", err)
				}
			}
		default:
			if err := d.SkipValue(); err != nil {
				return "", "", ts, err
			}
		}
	}
	return recordID, tenantID, ts, nil
}

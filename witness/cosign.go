package witness

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// maxLines bounds the signature lines read from one answer or one
// bundle member.
const maxLines = 64

// SplitLines splits a witness's answer (or a bundle's cosignatures
// member) into note signature lines, each "— " + name + " " + base64 and
// a line feed. Anything else is an error: an answer that is not
// signature lines is garbage, not an empty answer.
func SplitLines(data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, errors.New("no signature lines")
	}
	if data[len(data)-1] != '\n' {
		return nil, errors.New("the last signature line does not end in a line feed")
	}
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data[:i+1]
		data = data[i+1:]
		if !bytes.HasPrefix(line, []byte("— ")) || bytes.Count(line, []byte(" ")) != 2 {
			return nil, fmt.Errorf("%q is not a note signature line", truncate(line))
		}
		if len(out) == maxLines {
			return nil, fmt.Errorf("more than %d signature lines", maxLines)
		}
		out = append(out, line)
	}
	return out, nil
}

// Verify checks one signature line against a checkpoint note with a
// witness's key: the line must be a cosignature/v1 signature by that key
// over the checkpoint's body (the note's text, extension lines
// included), with a non-zero timestamp. It returns that timestamp. A
// line of another key is ErrOtherKey.
func Verify(checkpoint, line []byte, k Key) (time.Time, error) {
	name, hash, err := lineKey(line)
	if err != nil {
		return time.Time{}, err
	}
	if name != k.Name() || hash != k.Hash() {
		return time.Time{}, ErrOtherKey
	}
	msg := make([]byte, 0, len(checkpoint)+len(line))
	msg = append(append(msg, checkpoint...), line...)
	n, err := note.Open(msg, note.VerifierList(k.Verifier))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			return time.Time{}, ErrOtherKey
		}
		return time.Time{}, fmt.Errorf("cosignature of %s: %w", k.Name(), err)
	}
	for _, s := range n.Sigs {
		if s.Name != k.Name() || s.Hash != k.Hash() || s.Base64+"\n" != string(bytes.TrimPrefix(line, []byte("— "+s.Name+" "))) {
			continue
		}
		ts, err := fnote.CoSigV1Timestamp(s)
		if err != nil {
			return time.Time{}, fmt.Errorf("cosignature of %s: %w", k.Name(), err)
		}
		if ts.Unix() <= 0 {
			return time.Time{}, fmt.Errorf("cosignature of %s has no timestamp", k.Name())
		}
		return ts.UTC(), nil
	}
	// The key verified a signature line of the checkpoint itself, not
	// this line.
	return time.Time{}, ErrOtherKey
}

// lineKey reads the key name and key hash of a signature line.
func lineKey(line []byte) (string, uint32, error) {
	rest, ok := bytes.CutPrefix(line, []byte("— "))
	name, b64, ok2 := bytes.Cut(bytes.TrimSuffix(rest, []byte("\n")), []byte(" "))
	sig, err := base64.StdEncoding.Strict().DecodeString(string(b64))
	if !ok || !ok2 || len(name) == 0 || err != nil || len(sig) < 5 {
		return "", 0, fmt.Errorf("%q is not a note signature line", truncate(line))
	}
	return string(name), binary.BigEndian.Uint32(sig), nil
}

// ErrOtherKey is Verify's answer for a line that is not by the key.
var ErrOtherKey = errors.New("the signature line is not by this witness key")

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return append(b[:80:80], "…"...)
	}
	return b
}

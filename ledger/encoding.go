package ledger

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/writhq/writ/internal/strictb64"
)

// CheckNoteEncoding checks that every signature line of a signed note
// ("— <name> <base64>\n", after the note's last blank line) carries its
// signature in canonical base64 (internal/strictb64). note.Open decodes
// leniently, so without this one checkpoint would have many encodings:
// non-zero padding bits, or line breaks inside the base64, would still
// verify. Lines are otherwise left to note.Open.
func CheckNoteEncoding(msg []byte) error {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return fmt.Errorf("checkpoint: not a signed note")
	}
	sigs := string(msg[i+2:])
	for sigs != "" {
		line, rest, ok := strings.Cut(sigs, "\n")
		if !ok {
			return fmt.Errorf("checkpoint: signature line %q does not end with a line feed", line)
		}
		sigs = rest
		body, ok := strings.CutPrefix(line, "— ")
		if !ok {
			return fmt.Errorf("checkpoint: malformed signature line %q", line)
		}
		_, b64, ok := strings.Cut(body, " ")
		if !ok {
			return fmt.Errorf("checkpoint: malformed signature line %q", line)
		}
		if _, err := strictb64.DecodeString(b64); err != nil {
			return fmt.Errorf("checkpoint: signature line %q: %v", line, err)
		}
	}
	return nil
}

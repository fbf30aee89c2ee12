package writ

// Provenance says how writ knows a decision input: the one vocabulary the
// record, CEL rules, lint and docs/trust.md share. A limit that matters
// rests on the first three; the last is the caller's word.
type Provenance string

// Provenances.
const (
	// ProvenanceAuthenticated comes from a credential writ verified: the
	// API key that signed in, or a token from an issuer the tenant trusts.
	ProvenanceAuthenticated Provenance = "authenticated"
	// ProvenanceObserved is what writ saw happen: its own checks and
	// records, execution reports, run events, the MCP gateway's calls.
	ProvenanceObserved Provenance = "observed"
	// ProvenanceIssued is signed or submitted by a party the tenant trusts
	// (an issuer key: an identity service, a fraud engine, a meter).
	ProvenanceIssued Provenance = "issued"
	// ProvenanceClaimed is the caller's word, and nothing more.
	ProvenanceClaimed Provenance = "claimed"
)

// Provenances lists every provenance.
var Provenances = []Provenance{ProvenanceAuthenticated, ProvenanceObserved, ProvenanceIssued, ProvenanceClaimed}

// Valid reports whether p is a known provenance.
func (p Provenance) Valid() bool {
	for _, q := range Provenances {
		if p == q {
			return true
		}
	}
	return false
}

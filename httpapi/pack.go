package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/pack"
)

var errNoPackServed = writ.Errorf(writ.ENOTFOUND, "this server enforces no pack")

// wirePack is the pack in force as GET /v1/pack answers it: what it is
// (name, version, hash) and its rules, bundle by bundle.
type wirePack struct {
	Pack        string       `json:"pack"`
	Name        string       `json:"name"`
	Version     string       `json:"version"`
	Hash        string       `json:"hash"`
	Description string       `json:"description,omitempty"`
	Bundles     []wireBundle `json:"bundles"`
}

type wireBundle struct {
	BundleID    string     `json:"bundle_id"`
	Version     string     `json:"version"`
	Description string     `json:"description,omitempty"`
	Rules       []wireRule `json:"rules"`
}

type wireRule struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Effect      string `json:"effect"`
	Gate        string `json:"gate,omitempty"`
	When        string `json:"when,omitempty"`
	// AppliesTo lists the tools, action classes and decision keys the rule
	// applies to ("tool:…", "action_class:…", "decision_key:…"); empty,
	// it applies to every check.
	AppliesTo []string `json:"applies_to"`
}

func toWirePack(p *pack.Pack) wirePack {
	out := wirePack{Pack: p.ID(), Name: p.Name, Version: p.Version, Hash: p.Hash, Description: strings.TrimSpace(p.Description), Bundles: []wireBundle{}}
	ids := make([]string, 0, len(p.Bundles))
	for id := range p.Bundles {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := p.Bundles[id]
		wb := wireBundle{BundleID: b.BundleID, Version: b.Version, Description: strings.TrimSpace(b.Description), Rules: []wireRule{}}
		for _, r := range b.Rules {
			applies := []string{}
			for _, t := range r.AppliesTo.Tools {
				applies = append(applies, "tool:"+t)
			}
			for _, c := range r.AppliesTo.ActionClasses {
				applies = append(applies, "action_class:"+c)
			}
			for _, k := range r.AppliesTo.DecisionKeys {
				applies = append(applies, "decision_key:"+k)
			}
			wb.Rules = append(wb.Rules, wireRule{ID: r.ID, Description: strings.TrimSpace(r.Description), Effect: r.Effect, Gate: r.Gate,
				When: strings.TrimSpace(r.When), AppliesTo: applies})
		}
		out.Bundles = append(out.Bundles, wb)
	}
	return out
}

// handlePack serves GET /v1/pack: the pack this server enforces, the
// same for every tenant.
func (s *Server) handlePack(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Pack == nil {
		s.writeError(w, r, errNoPackServed)
		return
	}
	// The tenant is checked as everywhere (another tenant's is 403),
	// though every tenant is answered the same pack.
	if _, err := queryTenant(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, toWirePack(s.cfg.Pack))
}

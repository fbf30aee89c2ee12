package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writhq/writ"
	"github.com/writhq/writ/record"
)

// ClassParams is a record's pinned parameter values that the parameter
// change it names does not hold: the values were changed after the
// record was sealed, or the change record is not the tenant's.
const ClassParams = "changed_params"

// checkParams holds the parameter values a check pinned against the
// parameter change record it names: that record must be the tenant's
// change of the pack, and its values must be the ones pinned, each
// parameter it set, the default for the others (which the rebuilt
// record, built from the pinned values, cannot see by itself).
func (rp *replaying) checkParams(ctx context.Context) error {
	pin := rp.head.Params
	if pin == nil || pin.Set == "" {
		return nil
	}
	sr, err := rp.r.store.Record(ctx, rp.head.TenantID, pin.Set)
	switch {
	case writ.ErrorCode(err) == writ.ENOTFOUND:
		rp.res.Differences = append(rp.res.Differences, Difference{Class: ClassParams, Path: "params.set", Input: "record " + pin.Set,
			Detail: "the parameter change the record pins is not on file"})
		return nil
	case err != nil:
		return fmt.Errorf("read parameter change %s of record %s: %w", pin.Set, rp.head.RecordID, err)
	}
	set, _ := sr.Record.Outputs["values"].(map[string]any)
	if KindOf(sr.Record.DecisionKey) != KindParamsChange {
		rp.res.Differences = append(rp.res.Differences, Difference{Class: ClassParams, Path: "params.set", Input: "record " + pin.Set,
			Detail: "the record pins " + pin.Set + " as its parameter change, but that record is a " + sr.Record.DecisionKey + " record"})
		return nil
	}
	for name, v := range set {
		pv, ok := pin.Values[name]
		if !ok {
			continue // a parameter the pack no longer declares
		}
		a, err1 := record.CanonicalDigest(v)
		b, err2 := record.CanonicalDigest(pv)
		if err1 != nil || err2 != nil || a != b {
			rp.res.Differences = append(rp.res.Differences, Difference{Class: ClassParams, Path: "params.values." + name, Input: "record " + pin.Set,
				Recorded: anyJSON(pv), Replayed: anyJSON(v),
				Detail: "the record pins a value of parameter " + name + " that its parameter change " + pin.Set + " did not set"})
		}
	}
	return nil
}

// paramsChange rebuilds a tenant's parameter change record from its
// envelope.
func (rp *replaying) paramsChange(pin *pinned, envelope []byte) (*writ.Record, error) {
	rec, err := record.ParamsChange(pin.pol.Pack, rp.head.RecordID, envelope, rp.head.Outputs.Replaces, rp.head.Timestamp.UTC())
	if err != nil {
		rp.errorf("the parameter change cannot be rebuilt: %v", err)
		return nil, nil
	}
	return rec, nil
}

func anyJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// evidence rebuilds an evidence record, or an evidence revocation
// record, from its envelope.
func (rp *replaying) evidence(pin *pinned, envelope []byte) (*writ.Record, error) {
	build := record.Evidence
	if strings.HasPrefix(rp.head.DecisionKey, writ.EvidenceRevocationKeyPrefix) {
		build = record.EvidenceRevocation
	}
	rec, err := build(pin.pol.Pack, rp.head.RecordID, envelope, rp.head.Timestamp.UTC())
	if err != nil {
		rp.errorf("the evidence record cannot be rebuilt: %v", err)
		return nil, nil
	}
	return rec, nil
}

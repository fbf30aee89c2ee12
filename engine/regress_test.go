package engine_test

import (
	"context"
	"testing"
	"testing/iotest"

	"github.com/writhq/writ/engine"
)

// TestIDsDrawnWhole: ids and trace ids are drawn with io.ReadFull, so a
// random source that returns fewer bytes than asked (as io.Reader may)
// gives the same ids as one that fills each read.
func TestIDsDrawnWhole(t *testing.T) {
	ctx := context.Background()
	whole := newHarness(t, example("refund"))
	short := newHarness(t, example("refund"), func(c *engine.Config) { c.Random = iotest.OneByteReader(newSeededReader(1)) })
	for _, h := range []*harness{whole, short} {
		req := refundRequest(t, "refund-allow")
		req.TraceID = ""
		rc, err := h.eng.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if h == whole {
			continue
		}
		want, _ := whole.eng.Check(ctx, refundRequest(t, "refund-allow")) // the idempotent answer
		if rc.DecisionID != want.DecisionID || rc.Metadata.RecordID != want.Metadata.RecordID || rc.Metadata.TraceID != want.Metadata.TraceID {
			t.Errorf("ids from a one-byte reader = %s %s %s, want %s %s %s", rc.DecisionID, rc.Metadata.RecordID, rc.Metadata.TraceID,
				want.DecisionID, want.Metadata.RecordID, want.Metadata.TraceID)
		}
	}
}

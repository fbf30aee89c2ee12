package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/ledger"
)

// unreadableStore fails every read of earlier answers, as a database
// that went away between two statements would.
type unreadableStore struct{ ledger.Store }

func (unreadableStore) Priors(context.Context, string, string, ledger.BlockKey) (ledger.Priors, error) {
	return ledger.Priors{}, errors.New("connection reset by peer (host db-7.internal)")
}

// TestFailClosedIsLoggedUnderItsDecisionID: the server's log has the
// cause of a fail-closed answer under the decision id the caller got, so
// an operator handed the receipt finds why; the caller never sees it.
func TestFailClosedIsLoggedUnderItsDecisionID(t *testing.T) {
	var logged strings.Builder
	h := newHarness(t, example("refund"), func(c *engine.Config) {
		c.Store = unreadableStore{c.Store}
		c.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
	})
	rc, err := h.eng.Check(context.Background(), refundRequest(t, "refund-allow"))
	if writ.ErrorCode(err) != writ.EUNAVAILABLE || rc == nil || rc.SafeToExecute || !rc.Metadata.FailClosed {
		t.Fatalf("Check on an unreadable store = %+v, %v; want a fail-closed receipt", rc, err)
	}
	if strings.Contains(rc.Reasons[0].Message, "db-7") {
		t.Errorf("the cause leaked to the caller: %s", rc.Reasons[0].Message)
	}
	l := logged.String()
	for _, want := range []string{`"msg":"check failed closed"`, `"decision_id":"` + rc.DecisionID + `"`, `"tenant":"acme"`, "db-7.internal"} {
		if !strings.Contains(l, want) {
			t.Errorf("the log lacks %s:\n%s", want, l)
		}
	}
}

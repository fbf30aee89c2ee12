package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
	"github.com/writhq/writ/pack"
	"github.com/writhq/writ/policy"
	"github.com/writhq/writ/sqlite"
)

// TestParamsUnfitFailClosed: a tenant's stored parameter value that the
// pack in force no longer accepts (a new version changed the parameter's
// type) fails the tenant's checks closed, saying so, until the tenant
// sets a value that fits; another tenant, on the defaults, is decided.
func TestParamsUnfitFailClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	open := func(packDir string) *engine.Engine {
		p, err := pack.Load(packDir)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := policy.Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(ctx, engine.Config{Policy: pol, Store: st, BindingKey: testBindingKey, Now: func() time.Time { return exampleClock }})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	v1 := open(example("messaging"))
	if _, err := v1.SetParams(ctx, &writ.SetParamsRequest{TenantID: "acme", Values: map[string]any{"bulk_recipients": 3}, By: "human:ops", Reason: "small team"}); err != nil {
		t.Fatal(err)
	}
	v1.Close()

	// v2 makes bulk_recipients a string: acme's 3 no longer fits.
	v2dir := filepath.Join(t.TempDir(), "messaging")
	if err := os.CopyFS(v2dir, os.DirFS(example("messaging"))); err != nil {
		t.Fatal(err)
	}
	params := filepath.Join(v2dir, "params.yaml")
	b, _ := os.ReadFile(params)
	b = []byte(strings.Replace(string(b), "schema: {type: integer, minimum: 2, maximum: 1000}\n    default: 10", "schema: {type: string}\n    default: \"ten\"", 1))
	if err := os.WriteFile(params, b, 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := open(v2dir)
	defer v2.Close()
	req := readRequest(t, example("messaging", "requests", "email-internal-allow.json"))
	rc, err := v2.Check(ctx, req)
	if err == nil || rc == nil || rc.SafeToExecute || !rc.Metadata.FailClosed || !strings.Contains(writ.ErrorMessage(err)+describeReasons(rc), "parameter") {
		t.Fatalf("acme's check under v2 = %+v, %v; want fail closed naming its parameter values", rc, err)
	}
	other := *req
	other.TenantID = "globex"
	// (v2's rule compares a number with the string parameter, so it
	// fails closed itself: what matters is that the check is decided.)
	if rc, err := v2.Check(ctx, &other); err != nil || rc.Metadata.FailClosed || rc.Metadata.RecordID == "" {
		t.Fatalf("globex's check under v2 = %+v, %v; want it decided on the defaults", rc, err)
	}
	if _, err := v2.SetParams(ctx, &writ.SetParamsRequest{TenantID: "acme", Values: map[string]any{"bulk_recipients": "three"}, By: "human:ops", Reason: "v2"}); err != nil {
		t.Fatal(err)
	}
	if rc, err := v2.Check(ctx, req); err != nil || rc.Metadata.FailClosed || rc.Metadata.RecordID == "" {
		t.Fatalf("acme's check after a fitting value = %+v, %v; want it decided", rc, err)
	}
}

func describeReasons(rc *writ.Receipt) string {
	var b strings.Builder
	for _, r := range rc.Reasons {
		b.WriteString(r.Message)
	}
	return b.String()
}

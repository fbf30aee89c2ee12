package httpapi

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/writhq/writ"
)

// The request decoders face whatever a client sends. Fuzzed, each must
// never panic, must answer a bad body with an EINVALID error (never an
// internal one), and what it accepts must encode and decode again to
// the same value.

func addFiles(f *testing.F, pattern string) {
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		f.Fatalf("no seed files match %s", pattern)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func fuzzDecoder[T any](t *testing.T, body []byte) {
	var v T
	err := decodeStrict(body, &v)
	if err != nil {
		if writ.ErrorCode(err) != writ.EINVALID {
			t.Fatalf("decodeStrict(%q) = %v, want an EINVALID error", body, err)
		}
		return
	}
	again, err := json.Marshal(&v, json.Deterministic(true))
	if err != nil {
		t.Fatalf("an accepted body does not encode again: %v", err)
	}
	var w T
	if err := decodeStrict(again, &w); err != nil {
		t.Fatalf("an accepted body, encoded again (%s), is refused: %v", again, err)
	}
	// Compared encoded: an empty list and no list encode alike.
	if third, err := json.Marshal(&w, json.Deterministic(true)); err != nil || !bytes.Equal(third, again) {
		t.Fatalf("an accepted body encodes to %s, and decoded and encoded again to %s (%v)", again, third, err)
	}
}

func FuzzDecodeCheckRequest(f *testing.F) {
	addFiles(f, "../examples/*/requests/*.json")
	f.Add([]byte(`{"tenant_id":"acme","tool":"t","arguments":{"a":[1,2.5,"x",null,true]}}`))
	f.Add([]byte(`{"tenant_id":"acme","tenant_id":"acme"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecoder[writ.CheckRequest](t, body)
		if _, err := DecodeCheckRequest(body); err != nil && writ.ErrorCode(err) != writ.EINVALID {
			t.Fatalf("DecodeCheckRequest = %v, want an EINVALID error", err)
		}
	})
}

func FuzzDecodeAttempt(f *testing.F) {
	addFiles(f, "../examples/storybook/attempts/*.json")
	f.Add([]byte(`{"actor":{"type":"AGENT","id":"a"},"result":{"ok":true},"tool_calls":[{"tool":"x","args":{}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzDecoder[attemptBody](t, body) })
}

func FuzzDecodeApprovalDecision(f *testing.F) {
	f.Add([]byte(`{"tenant_id":"acme","approver":"usr_lead","reason":"checked the invoice","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`))
	f.Add([]byte(`{"reason":""}`))
	f.Add([]byte(`{"reason":"\u0000"}`))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzDecoder[decideBody](t, body) })
}

func FuzzDecodeExecutionReport(f *testing.F) {
	f.Add([]byte(`{"status":"succeeded","tool_result_id":"tr_121","result_digest":"sha256:2f9cc0d7a1b3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9","idempotency_key":"ik_1","reversal_token":"rv_1","started_at":"2026-05-09T09:31:50Z","ended_at":"2026-05-09T09:31:52Z"}`))
	f.Add([]byte(`{"tenant_id":"acme","status":"failed","error":{"code":"provider_down","message":"503"},"usage":{"tokens":12,"cost_usd_cents":0.5},"actor":{"type":"AGENT","id":"a"}}`))
	f.Add([]byte(`{"status":"done","started_at":"yesterday"}`))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzDecoder[writ.ExecutionReport](t, body) })
}

func FuzzDecodeResume(f *testing.F) {
	f.Add([]byte(`{"request":{"tool":"payments.issue_refund","arguments":{"amount_inr":15000}},"wait":"30s"}`))
	f.Add([]byte(`{"tenant_id":"acme","request":null,"wait":"-1h"}`))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzDecoder[resumeBody](t, body) })
}

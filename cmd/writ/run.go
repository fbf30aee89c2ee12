package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/engine"
)

// run drives workflow runs against a data directory, in-process: start a
// run, submit a step attempt, show a run with its history.
func (m *Main) run(ctx context.Context, args []string) error {
	usage := usagef("usage: writ run start|attempt|show --pack DIR --tenant T [flags]")
	if len(args) == 0 {
		return usage
	}
	sub := args[0]
	fs := m.flags("run "+sub, "--pack DIR --tenant T [flags]")
	data := fs.String("data", defaultDataDir, "data directory")
	storeURL := fs.String("store", "", storeUsage)
	packDir := fs.String("pack", "", "pack directory (required)")
	tenant := fs.String("tenant", "", "tenant (required)")
	runID := fs.String("run", "", "run id (attempt, show; start: optional)")
	workflow := fs.String("workflow", "", "start: the workflow id")
	contextFile := fs.String("context", "", "start: a JSON file of context values")
	step := fs.String("step", "", "attempt: the step id")
	attemptFile := fs.String("attempt", "", `attempt: a JSON file {"result": {...}, "tool_calls": [...]}`)
	actor := fs.String("actor", "agent:cli", "attempt: the actor as type:id")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *packDir == "" || *tenant == "" {
		return usagef("writ run %s needs --pack and --tenant", sub)
	}
	if fs.NArg() > 0 {
		return usagef("run %s takes no arguments, got %q", sub, fs.Args())
	}
	pol, err := loadPolicy(*packDir)
	if err != nil {
		return err
	}
	st, err := openStore(*data, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	log, _ := m.logger("warn")
	keys, _, err := m.openSigningKeys(defaultKeysDir(*data), time.Now(), log)
	if err != nil {
		return err
	}
	eng, err := openEngine(ctx, engine.Config{Policy: pol, Store: st, Logger: log, Keys: keys}, *data, "")
	if err != nil {
		return err
	}
	defer eng.Close()
	switch sub {
	case "start":
		req := &writ.StartRunRequest{TenantID: *tenant, WorkflowID: *workflow, RunID: *runID}
		if *contextFile != "" {
			if err := readJSONFile(*contextFile, &req.Context); err != nil {
				return err
			}
		}
		r, err := eng.StartRun(ctx, req)
		if err != nil {
			return err
		}
		return m.printJSON(r)
	case "attempt":
		if *runID == "" || *step == "" || *attemptFile == "" {
			return usagef("usage: writ run attempt --pack DIR --tenant T --run ID --step ID --attempt FILE")
		}
		var body struct {
			Result    map[string]any       `json:"result"`
			ToolCalls []writ.ToolCallClaim `json:"tool_calls"`
		}
		if err := readJSONFile(*attemptFile, &body); err != nil {
			return err
		}
		typ, id, ok := cutActor(*actor)
		if !ok {
			return usagef("--actor must be type:id, like agent:builder")
		}
		v, err := eng.SubmitAttempt(ctx, &writ.AttemptRequest{TenantID: *tenant, RunID: *runID, StepID: *step, Actor: writ.Actor{Type: typ, ID: id}, Result: body.Result, ToolCalls: body.ToolCalls})
		if err != nil {
			return err
		}
		return m.printJSON(v)
	case "show":
		if *runID == "" {
			return usagef("usage: writ run show --pack DIR --tenant T --run ID")
		}
		r, err := eng.Run(ctx, *tenant, *runID)
		if err != nil {
			return err
		}
		return m.printJSON(r)
	}
	return usage
}

func cutActor(s string) (typ, id string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			t := s[:i]
			switch t {
			case "agent":
				t = writ.ActorAgent
			case "human":
				t = writ.ActorHuman
			case "service":
				t = writ.ActorService
			}
			return t, s[i+1:], s[i+1:] != ""
		}
	}
	return "", "", false
}

// readJSONFile decodes a JSON file strictly into v.
func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

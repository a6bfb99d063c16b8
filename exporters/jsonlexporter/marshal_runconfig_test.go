package jsonlexporter

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// runConfigLogs is one process's run_config records; fill sets each record's body.
func runConfigLogs(fill ...func(body pcommon.Map)) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(sc.HostName, "n1")
	rl.Resource().Attributes().PutStr(sc.ServiceName, "miles-trainer")
	rl.Resource().Attributes().PutInt(sc.ProcessPID, 4242)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, f := range fill {
		lr := lrs.AppendEmpty()
		lr.SetEventName(sc.EventRunConfig)
		lr.SetTimestamp(ts(time.Duration(-10+i) * time.Second))
		f(lr.Body().SetEmptyMap())
	}
	return ld
}

// TestRunConfigRecord: a run-config event becomes one run_config line (docs/semconv.md §11) with the resource's
// node, service and pid, its arguments as sent (null kept), the sender's redacted list, and the secret rule
// applied again to a sender that did not apply it (a key named like a secret, credentials in a URL).
func TestRunConfigRecord(t *testing.T) {
	e, dir := testExporter(t, nil)
	ld := runConfigLogs(func(body pcommon.Map) {
		a := body.PutEmptyMap("args")
		a.PutDouble("lr", 1e-6)
		a.PutBool("colocate", true)
		a.PutInt("rollout_batch_size", 32)
		a.PutStr("hf_checkpoint", "/ckpt/Qwen3")
		a.PutEmpty("save")
		a.PutStr("wandb_key", "[redacted]")
		a.PutStr("hf_token", "hf_live_secret")                            // not redacted by its sender
		a.PutStr("num_key_value_heads", "8")                              // not a secret
		a.PutStr("wandb_host", "https://bob:hunter2@wandb.example.com/x") // credentials in a URL
		a.PutStr("db_password", "")                                       // unset: kept
		l := a.PutEmptySlice("eval_datasets")
		l.AppendEmpty().SetStr("aime")
		l.AppendEmpty().SetStr("redis://:pw@cache:6379")
		body.PutEmptySlice("redacted").AppendEmpty().SetStr("wandb_key")
		body.PutEmptySlice("truncated").AppendEmpty().SetStr("prompt_template")
		body.PutInt("dropped", 3)
	})
	if err := e.pushLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	text := readFile(t, filepath.Join(dir, "dashboard", sc.StreamRunConfig, "20261202_13.jsonl"))
	if strings.Contains(text, "hf_live_secret") || strings.Contains(text, "hunter2") || strings.Contains(text, ":pw@") {
		t.Fatalf("a secret reached the file: %s", text)
	}
	var rec struct {
		TS        float64        `json:"ts"`
		Node      string         `json:"node"`
		Service   string         `json:"service"`
		PID       int            `json:"pid"`
		Args      map[string]any `json:"args"`
		Redacted  []string       `json:"redacted"`
		Truncated []string       `json:"truncated"`
		Dropped   int            `json:"dropped"`
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), text)
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Node != "n1" || rec.Service != "miles-trainer" || rec.PID != 4242 || rec.TS != float64(ts(-10*time.Second))/1e9 {
		t.Errorf("head %+v", rec)
	}
	want := map[string]any{
		"lr": 1e-6, "colocate": true, "rollout_batch_size": 32.0, "hf_checkpoint": "/ckpt/Qwen3", "save": nil,
		"wandb_key": sc.RunConfigRedacted, "hf_token": sc.RunConfigRedacted, "num_key_value_heads": "8",
		"wandb_host": "https://[redacted]@wandb.example.com/x", "db_password": "",
		"eval_datasets": []any{"aime", "redis://[redacted]@cache:6379"},
	}
	if len(rec.Args) != len(want) {
		t.Errorf("args %v", rec.Args)
	}
	for k, v := range want {
		got, ok := rec.Args[k]
		if !ok || jsonText(got) != jsonText(v) {
			t.Errorf("args[%s] = %v, want %v", k, got, v)
		}
	}
	if strings.Join(rec.Redacted, ",") != "wandb_key,hf_token" {
		t.Errorf("redacted %v, want the sender's then the exporter's", rec.Redacted)
	}
	if strings.Join(rec.Truncated, ",") != "prompt_template" || rec.Dropped != 3 {
		t.Errorf("truncated %v dropped %d", rec.Truncated, rec.Dropped)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestRunConfigRefused: a body without an args map is invalid; a record over an ingest limit (too many
// arguments, a long name or string, a long array, an array of arrays, a map value) is over_limit; neither is
// written, and a valid record beside them is.
func TestRunConfigRefused(t *testing.T) {
	e, dir := testExporter(t, nil)
	over := []func(a pcommon.Map){
		func(a pcommon.Map) {
			for i := range sc.RunConfigMaxArgs + 1 {
				a.PutInt("a"+strconv.Itoa(i), 1)
			}
		},
		func(a pcommon.Map) { a.PutInt(strings.Repeat("k", sc.RunConfigMaxKeyBytes+1), 1) },
		func(a pcommon.Map) { a.PutStr("prompt", strings.Repeat("x", sc.RunConfigMaxString+1)) },
		func(a pcommon.Map) {
			l := a.PutEmptySlice("l")
			for range sc.RunConfigMaxList + 1 {
				l.AppendEmpty().SetInt(1)
			}
		},
		func(a pcommon.Map) { a.PutEmptySlice("l").AppendEmpty().SetEmptySlice().AppendEmpty().SetInt(1) },
		func(a pcommon.Map) { a.PutEmptyMap("optim").PutDouble("lr", 1) },
	}
	var fills []func(pcommon.Map)
	fills = append(fills, func(b pcommon.Map) { b.PutStr("args", "lr=1") }, func(b pcommon.Map) { b.PutInt("x", 1) })
	for _, f := range over {
		fills = append(fills, func(b pcommon.Map) { f(b.PutEmptyMap("args")) })
	}
	fills = append(fills, func(b pcommon.Map) { b.PutEmptyMap("args").PutStr("ok", strings.Repeat("y", sc.RunConfigMaxString)) })
	if err := e.pushLogs(context.Background(), runConfigLogs(fills...)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	if got := e.tel.invalidItems.Load(); got != 2 {
		t.Errorf("invalid = %d, want 2", got)
	}
	if got := e.tel.overLimitItems.Load(); got != int64(len(over)) {
		t.Errorf("over_limit = %d, want %d", got, len(over))
	}
	b, err := os.ReadFile(filepath.Join(dir, "dashboard", sc.StreamRunConfig, "20261202_13.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 1 || !strings.Contains(string(b), `"ok":"yyy`) {
		t.Errorf("want only the valid record, got %d lines", n)
	}
}

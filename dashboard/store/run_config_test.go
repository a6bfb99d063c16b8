package store

import (
	"strings"
	"testing"
)

// TestReadRunConfig: the newest run_config record by ts across the top-level layout and every shard wins
// (docs/semconv.md §11); torn and foreign lines are skipped; without a record, meta.json "args" is the source;
// without either, none.
func TestReadRunConfig(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","args":{"colocate":true}}`)
	// hour 13: the first record (top level); hour 14: a resumed run recorded again, in two shards.
	write(t, dir, "dashboard/run_config/20261202_13.jsonl",
		`{"ts":1796220000,"node":"n0","service":"miles-trainer","pid":1,"args":{"lr":1e-6,"seed":1}}`+"\n")
	write(t, dir, "dashboard/shards/gw-a/run_config/20261202_14.jsonl",
		`{"ts":1796223700,"node":"n0","service":"miles-trainer","pid":2,"args":{"lr":2e-6,"seed":2,"wandb_key":"[redacted]","save":null},"redacted":["wandb_key"]}`+"\n"+
			`not json`+"\n"+`{"ts":1796223800,"args":{"lr":`) // a torn tail
	write(t, dir, "dashboard/shards/gw-b/run_config/20261202_14.jsonl",
		`{"ts":1796223650,"pid":3,"args":{"lr":3e-6}}`+"\n"+`{"ts":1796223900,"note":"no args"}`+"\n")
	rc, err := ReadRunConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Source != "run_config" || rc.PID != 2 || rc.TS != 1796223700 || rc.Records != 2 {
		t.Fatalf("got %+v, want shard gw-a's record of hour 14 (2 records in it)", rc)
	}
	if rc.Args["lr"] != 2e-6 || rc.Args["seed"] != 2.0 || rc.Args["wandb_key"] != "[redacted]" {
		t.Errorf("args %v", rc.Args)
	}
	if v, ok := rc.Args["save"]; !ok || v != nil {
		t.Errorf("an unset argument is kept as null: %v", rc.Args)
	}
	if strings.Join(rc.Redacted, ",") != "wandb_key" || rc.Truncated == nil {
		t.Errorf("redacted %v truncated %v", rc.Redacted, rc.Truncated)
	}

	// Equal ts: the one read last (shards after the top level).
	dir2 := t.TempDir()
	write(t, dir2, "dashboard/run_config/20261202_13.jsonl", `{"ts":1796220000,"pid":1,"args":{"a":1}}`+"\n")
	write(t, dir2, "dashboard/shards/s1/run_config/20261202_13.jsonl", `{"ts":1796220000,"pid":9,"args":{"a":2}}`+"\n")
	if rc, _ := ReadRunConfig(dir2); rc.PID != 9 {
		t.Errorf("tie: pid %d, want the shard's", rc.PID)
	}

	// No record: meta.json's args (miles v1); nothing at all: no source.
	dir3 := t.TempDir()
	write(t, dir3, "dashboard/meta.json", `{"run_name":"v1","args":{"colocate":false},"schema_version":1}`)
	if rc, _ := ReadRunConfig(dir3); rc.Source != "meta.json" || rc.Args["colocate"] != false {
		t.Errorf("fallback %+v", rc)
	}
	dir4 := t.TempDir()
	write(t, dir4, "dashboard/meta.json", `{"run_name":"x"}`)
	write(t, dir4, "dashboard/run_config/20261202_13.jsonl", "garbage\n")
	if rc, _ := ReadRunConfig(dir4); rc.Source != "" || rc.Args != nil {
		t.Errorf("none %+v", rc)
	}
}

// TestRunConfigWrittenTwiceCountsOnce: a run_config record written twice (at-least-once delivery: the same ts,
// node, service and pid, once in each shard) is one record (docs/semconv.md §8 "Record identity").
func TestRunConfigWrittenTwiceCountsOnce(t *testing.T) {
	dir := t.TempDir()
	line := `{"ts":1796220000,"node":"n0","service":"miles-trainer","pid":1,"args":{"lr":1e-6}}` + "\n"
	write(t, dir, "dashboard/shards/gw-0/run_config/20261202_13.jsonl", line+line)
	write(t, dir, "dashboard/shards/gw-1/run_config/20261202_13.jsonl", line)
	rc, err := ReadRunConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Records != 1 || rc.PID != 1 {
		t.Fatalf("got %+v, want 1 record", rc)
	}
}

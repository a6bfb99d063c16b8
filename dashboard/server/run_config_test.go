package server

import (
	"path/filepath"
	"testing"
)

// TestLibraryRunConfig: the runs list says where each run's trainer arguments come from without opening it
// (the emitter's run_config record, else meta.json "args"); GET /api/v1/run_config?run= gives them; a record
// written after the first listing is in the next one.
func TestLibraryRunConfig(t *testing.T) {
	root := t.TempDir()
	a := moveRun(t, fixture(t, 8), root, "a")
	b := moveRun(t, fixture(t, 8), root, "b")
	rec := `{"ts":1796220000,"node":"n0","service":"miles-trainer","pid":7,"args":{"lr":1e-06,"seed":1,"wandb_key":"[redacted]"},"redacted":["wandb_key"]}` + "\n"
	writeFile(t, filepath.Join(a, "dashboard", "run_config", "20261202_13.jsonl"), rec, false)
	meta := filepath.Join(b, "dashboard", "meta.json")
	writeFile(t, meta, `{"schema_version":1,"run_name":"b","start_ts":1796220000,"args":{"colocate":true}}`, false)
	ts, opened := library(t, root, Options{})

	runs := runsOf(t, ts.URL+"/api/v1/runs")
	if c := runs["a"]["config"].(map[string]any); c["source"] != "run_config" || c["n"] != 3.0 || c["ts"] != 1796220000.0 {
		t.Errorf("a: config %v", c)
	}
	if c := runs["b"]["config"].(map[string]any); c["source"] != "meta.json" || c["n"] != 1.0 {
		t.Errorf("b: config %v", c)
	}
	if n := opened.Load(); n != 0 {
		t.Fatalf("listing opened %d runs", n)
	}
	code, m := getData(t, ts.URL+"/api/v1/run_config?run=a")
	args, _ := m["args"].(map[string]any)
	if code != 200 || m["source"] != "run_config" || m["pid"] != 7.0 || args["lr"] != 1e-06 || args["wandb_key"] != "[redacted]" {
		t.Fatalf("run_config of a: %d %v", code, m)
	}
	if code, m := getData(t, ts.URL+"/api/v1/run_config?run=b"); code != 200 || m["source"] != "meta.json" {
		t.Fatalf("run_config of b: %d %v", code, m)
	}
	// b's trainer records its arguments now: the next listing has them.
	writeFile(t, filepath.Join(b, "dashboard", "run_config", "20261202_14.jsonl"), `{"ts":1796223700,"args":{"colocate":true,"lr":2e-06}}`+"\n", false)
	if c := runsOf(t, ts.URL+"/api/v1/runs")["b"]["config"].(map[string]any); c["source"] != "run_config" || c["n"] != 2.0 {
		t.Errorf("b after its record: config %v", c)
	}
}

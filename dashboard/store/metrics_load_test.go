package store

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestParseStepRecMatchesJSON: the flat-scanner path reads metrics records exactly as encoding/json does.
func TestParseStepRecMatchesJSON(t *testing.T) {
	for _, line := range []string{
		`{"ts":1796219998.5,"step_key":"rollout/step","step":3,"metrics":{"rollout/raw_reward":0.41,"perf/step_time":93.25,"rollout/note":"text","rollout/ok":true,"x":null}}`,
		`{"ts":1796219998.5,"step_key":null,"step":null,"metrics":{"a":1e-7,"b":-3}}`,
		`{"ts":1796219998.5,"step_key":"eval/step","step":2,"metrics":{"eval/a\"quoted\"":1}}`,
		`{"ts":12,"metrics":{}}`,
	} {
		got, ok := parseStepRec([]byte(line))
		var want stepRec
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		want.nums = map[string]float64{}
		for k, v := range want.Metrics {
			if f, ok := v.(float64); ok {
				want.nums[k] = f
			}
		}
		str := func(r stepRec) string {
			sk, st := "nil", "nil"
			if r.StepKey != nil {
				sk = *r.StepKey
			}
			if r.Step != nil {
				st = fmt.Sprint(*r.Step)
			}
			return fmt.Sprint(r.TS, sk, st, r.nums)
		}
		if !ok || str(got) != str(want) {
			t.Errorf("%s:\n got %s (%v)\nwant %s", line, str(got), ok, str(want))
		}
	}
	for _, bad := range []string{`{"ts":0,"metrics":{}}`, `{"ts":1,"metrics":[1]}`, `not json`, `{"ts":1,"metrics":{"a":1`} {
		if _, ok := parseStepRec([]byte(bad)); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

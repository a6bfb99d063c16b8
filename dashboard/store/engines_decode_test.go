package store

import (
	"fmt"
	"testing"
)

// TestDecodeEngineRecordShapes: the grouped record the exporter writes, the earlier one-point record and the
// miles v1 record all decode to the same samples.
func TestDecodeEngineRecordShapes(t *testing.T) {
	collect := func(line string) ([]string, bool) {
		var out []string
		var buf []byte
		ok := decodeEngineRecord([]byte(line), &buf, func(es *engineSample) {
			if es.hist {
				out = append(out, fmt.Sprintf("%s %s hist count=%g sum=%g bounds=%s counts=%s labels=%s", es.addr, es.metric, es.count, es.sum, es.bounds, es.counts, es.labels))
			} else {
				out = append(out, fmt.Sprintf("%s %s v=%g labels=%s", es.addr, es.metric, es.v, es.labels))
			}
		})
		return out, ok
	}
	grouped, ok := collect(`{"ts":1.5,"addr":"http://e:1","labels":{"dp_rank":"0"},"m":{"sglang:num_running_reqs":3,"up":1},"h":{"sglang:ttft":{"count":12,"sum":3.5,"bounds":[0.1,1],"counts":[2,6,4]}}}`)
	want := []string{
		`http://e:1 sglang:num_running_reqs v=3 labels={"dp_rank":"0"}`,
		`http://e:1 up v=1 labels={"dp_rank":"0"}`,
		`http://e:1 sglang:ttft hist count=12 sum=3.5 bounds=[0.1,1] counts=[2,6,4] labels={"dp_rank":"0"}`,
	}
	if !ok || fmt.Sprint(grouped) != fmt.Sprint(want) {
		t.Fatalf("grouped: %v %v\nwant %v", ok, grouped, want)
	}
	one, ok := collect(`{"ts":1.5,"addr":"http://e:1","metric":"sglang_num_running_reqs","labels":{"dp_rank":"0"},"v":3}`)
	if !ok || fmt.Sprint(one) != fmt.Sprint(want[:1]) {
		t.Fatalf("one point (old router name): %v %v", ok, one)
	}
	v1, ok := collect(`{"ts":1.5,"addr":"http://e:1","metric":"sglang_num_running_reqs","labels":{"dp_rank":"0"},"value":3}`)
	if !ok || fmt.Sprint(v1) != fmt.Sprint(want[:1]) {
		t.Fatalf("miles v1: %v %v", ok, v1)
	}
	for _, bad := range []string{`{"ts":1.5,"addr":"x"}`, `{"addr":"x","m":{"a":1}}`, `{"ts":1,"addr":"x","m":{"a":1`} {
		if _, ok := collect(bad); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

package store

import (
	"fmt"
	"strings"
	"testing"
)

// TestHugeCatalogCapped: a lane_catalog.json written before the collector's ingest limits (one span listing
// 2^20 GPU ids gave 1,048,577 lanes on one node; here 200,000, the same shape) opens with the first 65,536
// lanes and says so in the notices; a lane key over 256 bytes (a 1 MB node name) is left out and counted.
func TestHugeCatalogCapped(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"version":2,"lanes":{`)
	fmt.Fprintf(&b, `%q:{"ranks":[0],"engine_addrs":[],"roles":["train"]}`, strings.Repeat("x", 300)+":0")
	for g := range 200_000 {
		fmt.Fprintf(&b, `,"n1:%d":{"uuid":"GPU-%d","ranks":[0],"engine_addrs":[],"roles":["train"]}`, g, g)
	}
	b.WriteString(`}}`)
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"huge","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", b.String())
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", gpuLine(h0+1, "n1", 0, 50)+gpuLine(h0+1, "n1", 150_000, 50))
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	m := st.Meta()
	if m.LanesTotal != laneCap {
		t.Errorf("%d lanes, want the cap %d", m.LanesTotal, laneCap)
	}
	var msgs []string
	for _, n := range m.Notices {
		msgs = append(msgs, n.Message)
	}
	all := strings.Join(msgs, "\n")
	if !strings.Contains(all, "more than 65536 lanes") || !strings.Contains(all, "1 lane(s) with a key over 256 bytes") {
		t.Errorf("notices %q lack the cap and the long key", all)
	}
	// A lane beyond the cap seen in the data is not added either.
	sel, _, _ := st.Lanes("all")
	st.GPU(h0, h0+10, sel, 10, []string{"util"})
	if n := st.Meta().LanesTotal; n != laneCap {
		t.Errorf("%d lanes after a GPU hour, want %d", n, laneCap)
	}
	if l, _, _ := st.Lanes("g0"); len(l) != 1 || l[0].Key != "n1:0" || l[0].UUID != "GPU-0" {
		t.Errorf("g0 = %+v", l)
	}
}

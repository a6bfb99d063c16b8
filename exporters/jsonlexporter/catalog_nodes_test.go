package jsonlexporter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogNodesTable: the addresses a GPU's resource lists as host.ip (the NVML receiver's) are kept in the
// catalog's nodes table under its host.name, once each, across exports and a restart, so readers can name a
// node given by address (miles' topology) by its host name (docs/semconv.md §1, "Node identity"; §8.2).
func TestCatalogNodesTable(t *testing.T) {
	ctx := context.Background()
	e, dir := testExporter(t, nil)
	md := gpuMetrics()
	for i := range md.ResourceMetrics().Len() {
		ips := md.ResourceMetrics().At(i).Resource().Attributes().PutEmptySlice("host.ip")
		ips.AppendEmpty().SetStr("10.0.0.2")
		ips.AppendEmpty().SetStr("fe80::1")
	}
	if err := e.pushMetrics(ctx, md); err != nil {
		t.Fatal(err)
	}
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Nodes map[string]struct {
			IPs []string `json:"ips"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "dashboard", "lane_catalog.json"))), &cat); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cat.Nodes["n1"].IPs, ","); got != "10.0.0.2,fe80::1" || len(cat.Nodes) != 1 {
		t.Fatalf("nodes table %+v, want n1 with 10.0.0.2 and fe80::1", cat.Nodes)
	}
	c := newLaneCatalog(filepath.Join(dir, "dashboard"))
	if _, err := c.load(base); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.nodes["n1"], ","); got != "10.0.0.2,fe80::1" {
		t.Fatalf("nodes after a restart: %v", c.nodes)
	}
}

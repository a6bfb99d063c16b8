package server

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
)

// scrape GETs a server's /metrics and returns its samples by name and labels (`name{labels}` → value).
func scrape(t *testing.T, base string, hdr http.Header) map[string]string {
	t.Helper()
	code, body := do(t, base+"/metrics", hdr)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	line := regexp.MustCompile(`^([a-z_]+)(?:\{([^}]*)\})? (\S+)$`)
	got := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not an exposition line: %q", l)
		}
		got[m[1]+"{"+m[2]+"}"] = m[3]
	}
	return got
}

// ruleGauges finds, in a scrape, the firing and skipped gauges of every rule for run (any run: ""): rule id →
// [firing, skipped] ("" where a gauge is missing).
func ruleGauges(got map[string]string, run string) map[string][2]string {
	out := map[string][2]string{}
	r := `[^"]*`
	if run != "" {
		r = regexp.QuoteMeta(run)
	}
	firing := regexp.MustCompile(`^miles_advisory_firing\{run="` + r + `",id="([A-Z][0-9])",rule="([a-z_]+)",severity="[a-z]+",tier="[a-z]+"\}$`)
	skipped := regexp.MustCompile(`^miles_advisory_skipped\{run="` + r + `",id="([A-Z][0-9])",rule="([a-z_]+)"\}$`)
	for k, v := range got {
		if m := firing.FindStringSubmatch(k); m != nil {
			g := out[m[1]]
			g[0] = v
			out[m[1]] = g
		}
		if m := skipped.FindStringSubmatch(k); m != nil {
			g := out[m[1]]
			g[1] = v
			out[m[1]] = g
		}
	}
	return out
}

// checkExposedLikeAdvisory: every rule of the advisory's table has its two gauges on the /metrics of a one-run
// server (its run named run; "": whatever it is named), and the gauges say what GET /api/v1/advisory says
// (given: firing 1, skipped: skipped 1, else 0).
func checkExposedLikeAdvisory(t *testing.T, base, run string) {
	t.Helper()
	gauges := ruleGauges(scrape(t, base, nil), run)
	code, d := getData(t, base+"/api/v1/advisory")
	if code != 200 {
		t.Fatal(code, d)
	}
	given, skipped := map[string]bool{}, map[string]bool{}
	for _, f := range []string{"advisories", "suppressed"} {
		for _, a := range d[f].([]any) {
			given[a.(map[string]any)["id"].(string)] = true
		}
	}
	for _, s := range d["skipped"].([]any) {
		skipped[s.(map[string]any)["id"].(string)] = true
	}
	for id := range given {
		if _, ok := gauges[id]; !ok {
			t.Errorf("the advisory gives %s, /metrics has no gauge of it", id)
		}
	}
	for id := range skipped {
		if _, ok := gauges[id]; !ok {
			t.Errorf("the advisory skips %s, /metrics has no gauge of it", id)
		}
	}
	for _, r := range advisory.Rules {
		want := [2]string{b2s(given[r.ID]), b2s(skipped[r.ID])}
		if got, ok := gauges[r.ID]; !ok || got != want {
			t.Errorf("/metrics on %s (%s): firing, skipped = %q, want %q", r.ID, r.Rule, got, want)
		}
	}
}

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// TestMetricsExportsEveryRule: GET /metrics of a real server lists every rule the advisory evaluates (its
// table, docs/dashboard-api.md "GET /api/v1/advisory"), T5 included, with what the advisory says of each.
func TestMetricsExportsEveryRule(t *testing.T) {
	want := []string{"A1", "A2", "A3", "A4", "A5", "A6", "A7", "S1", "S2", "D1", "E1", "T1", "T2", "T3", "T4", "T5"}
	for _, tc := range []struct {
		name string
		spec runSpec
	}{
		{"healthy", healthySpec},
		{"stalled_abort_storm", runSpec{openWaitAge: 2 * 3600, running: 5, abortRate: 0.3, mfu: 0.1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, _ := serve(t, handRun(t, tc.spec), Options{})
			gauges := ruleGauges(scrape(t, ts.URL, nil), "hand")
			if len(gauges) != len(want) {
				t.Errorf("/metrics has gauges of %d rules, want %d: %v", len(gauges), len(want), gauges)
			}
			for _, id := range want {
				if g, ok := gauges[id]; !ok || g[0] == "" || g[1] == "" {
					t.Errorf("/metrics lacks rule %s: %v", id, g)
				}
			}
			checkExposedLikeAdvisory(t, ts.URL, "hand")
		})
	}
}

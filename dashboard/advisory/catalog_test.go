package advisory

import (
	"os"
	"regexp"
	"testing"
)

// TestRulesCatalogComplete: Rules lists exactly the (id, rule, level, tier) of every alarm, tip and skip the
// rules can give, so a metrics exposition never misses or invents one.
func TestRulesCatalogComplete(t *testing.T) {
	src, err := os.ReadFile("rules.go")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]RuleInfo{}
	for _, r := range Rules {
		known[r.ID] = r
	}
	seen := map[string]bool{}
	re := regexp.MustCompile(`c\.(alarm|tip|skip)\("([A-Z][0-9])", "([a-z_]+)"(?:, (Critical|Warning|Info))?`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		kind, id, rule, level := m[1], m[2], m[3], m[4]
		seen[id] = true
		r, ok := known[id]
		if !ok || r.Rule != rule {
			t.Errorf("%s %s %s is not in Rules", kind, id, rule)
			continue
		}
		if kind != "skip" && (r.Tier != kind || map[string]string{"Critical": Critical, "Warning": Warning, "Info": Info}[level] != r.Level) {
			t.Errorf("%s %s fires as %s %s, Rules says %s %s", id, rule, kind, level, r.Tier, r.Level)
		}
	}
	for _, r := range Rules {
		if !seen[r.ID] {
			t.Errorf("Rules lists %s %s, which no rule gives", r.ID, r.Rule)
		}
	}
}

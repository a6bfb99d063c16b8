package advisory

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/goldenfile"
)

// TestRulesTable: every row of Rules is whole (a unique id and name, a level, a tier, an evaluator) and names
// only thresholds the thresholds table defines; every threshold is read by some rule.
func TestRulesTable(t *testing.T) {
	ids, names, read := map[string]bool{}, map[string]bool{}, map[string]bool{}
	defined := map[string]bool{}
	for _, th := range thresholds {
		defined[th.key] = true
	}
	for _, r := range Rules {
		if ids[r.ID] || names[r.Rule] {
			t.Errorf("%s %s: id or name twice", r.ID, r.Rule)
		}
		ids[r.ID], names[r.Rule] = true, true
		if _, ok := levelRank[r.Level]; !ok {
			t.Errorf("%s: level %q", r.ID, r.Level)
		}
		if r.Tier != TierAlarm && r.Tier != TierTip {
			t.Errorf("%s: tier %q", r.ID, r.Tier)
		}
		if r.eval == nil {
			t.Errorf("%s: no evaluator", r.ID)
		}
		for _, k := range r.Thresholds {
			if !defined[k] {
				t.Errorf("%s reads threshold %q, which the thresholds table lacks", r.ID, k)
			}
			read[k] = true
		}
	}
	for k := range defined {
		if !read[k] {
			t.Errorf("threshold %s is read by no rule of Rules", k)
		}
	}
	if len(defined) != len(thresholds) {
		t.Errorf("a threshold key twice")
	}
}

// TestRulesOnlyFromTable: no source file of the package but catalog.go spells a rule's id or name as a string,
// so a rule cannot be given (or exported) except through its row of Rules.
func TestRulesOnlyFromTable(t *testing.T) {
	lits := map[string]string{}
	for _, r := range Rules {
		lits[strconv.Quote(r.ID)], lits[strconv.Quote(r.Rule)] = r.ID, r.ID
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if f == "catalog.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
				if id, hit := lits[l.Value]; hit {
					t.Errorf("%s: %s spells rule %s outside catalog.go", fset.Position(l.Pos()), l.Value, id)
				}
			}
			return true
		})
	}
}

// TestRulesDocumented: the rule table of docs/dashboard-api.md "GET /api/v1/advisory" has one row per rule, in
// the order of Rules, with its id, name, tier and level.
func TestRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/dashboard-api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| ([A-Z]\d) \| ([a-z_]+) \| ([a-z]+), ([a-z]+) \|`)
	var got, want []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		got = append(got, strings.Join(m[1:], " "))
	}
	for _, r := range Rules {
		want = append(want, strings.Join([]string{r.ID, r.Rule, r.Tier, r.Level}, " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/dashboard-api.md lists the rules\n%s\nRules has\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRulesTS: the web app's rule types are Rules, written out (MILES_UPDATE_GOLDEN=1 or -update rewrites them;
// then make -C dashboard/web build).
func TestRulesTS(t *testing.T) {
	var b strings.Builder
	b.WriteString("// The advisory's rules, written from the table of dashboard/advisory/catalog.go by its TestRulesTS\n")
	b.WriteString("// (go test ./dashboard/advisory -run TestRulesTS -update); do not edit by hand.\n\n")
	list := func(name, doc string, field func(RuleInfo) string) {
		fmt.Fprintf(&b, "/** %s */\nexport const %s = [", doc, name)
		for i, r := range Rules {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", field(r))
		}
		b.WriteString("] as const;\n")
	}
	list("RULE_IDS", "Every rule's id, in the order the advisory evaluates them.", func(r RuleInfo) string { return r.ID })
	list("RULE_NAMES", "Every rule's name, in the same order.", func(r RuleInfo) string { return r.Rule })
	b.WriteString("export type RuleID = (typeof RULE_IDS)[number];\nexport type RuleName = (typeof RULE_NAMES)[number];\n")
	goldenfile.Assert(t, "../web/src/api/responseTypes/advisoryRules.ts", []byte(b.String()))
}

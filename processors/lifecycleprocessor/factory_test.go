package lifecycleprocessor

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != metadata.Type || f.Type().String() != "lifecycle" {
		t.Fatalf("type %q", f.Type())
	}
	if f.TracesStability() != metadata.TracesStability {
		t.Fatalf("stability %v", f.TracesStability())
	}
	cfg := f.CreateDefaultConfig()
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.(*Config).Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Capabilities().MutatesData {
		t.Fatal("the processor moves held spans out of the batch: it mutates data")
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop()); err == nil {
		t.Fatal("metrics pipelines are not supported and must be refused")
	}
}

// metadata.yaml and the hand-kept internal/metadata and telemetry agree.
func TestMetadataInStep(t *testing.T) {
	b, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Type   string `yaml:"type"`
		Status struct {
			Class     string              `yaml:"class"`
			Stability map[string][]string `yaml:"stability"`
		} `yaml:"status"`
		Telemetry struct {
			Metrics map[string]any `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	if md.Type != metadata.Type.String() || md.Status.Class != "processor" {
		t.Fatalf("metadata.yaml type %q class %q", md.Type, md.Status.Class)
	}
	if got := md.Status.Stability[strings.ToLower(metadata.TracesStability.String())]; len(got) != 1 || got[0] != "traces" {
		t.Fatalf("metadata.yaml stability %v, want %s: [traces]", md.Status.Stability, metadata.TracesStability)
	}
	src, err := os.ReadFile("telemetry.go")
	if err != nil {
		t.Fatal(err)
	}
	names := semconvConsts(t)
	used := regexp.MustCompile(`sc\.(MetricLifecycle\w+)`).FindAllStringSubmatch(string(src), -1)
	seen := map[string]bool{}
	for _, u := range used {
		name := names[u[1]]
		seen[name] = true
		if _, ok := md.Telemetry.Metrics[name]; !ok {
			t.Errorf("metric %s (%s) is not declared in metadata.yaml", name, u[1])
		}
	}
	for name := range md.Telemetry.Metrics {
		if !seen[name] {
			t.Errorf("metadata.yaml declares %s, which telemetry.go does not record", name)
		}
	}
}

// semconvConsts parses internal/semconv/lifecycle.go: constant name → value.
func semconvConsts(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "internal", "semconv", "lifecycle.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					out[n.Name] = v
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d constants parsed from lifecycle.go", len(out))
	}
	return out
}

// Every name this processor adds is documented in docs/semconv.md (the contract).
func TestNamesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "semconv.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range semconvConsts(t) {
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("%s = %q is not documented in docs/semconv.md", name, v)
		}
	}
}

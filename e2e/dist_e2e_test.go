package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

// TestDistE2E: what `make dist` ships installs and runs without a toolchain (README "Run it on a real job"). The
// archives of this machine's architecture (scripts/dist.sh; the collector packed from bin/otelcol-miles, so the
// test does not compile the distribution twice) match SHA256SUMS; the wheel installs into a fresh venv with no
// index and turns the instrumentation on under MILES_OTEL=1 alone; the archived collector, started with its
// archived configs/run.yaml, takes a phase from that venv, and the archived dashboard serves it.
func TestDistE2E(t *testing.T) {
	bin := e2etest.Binary(t)
	dist, install := t.TempDir(), t.TempDir()
	cmd := exec.Command("bash", filepath.Join(e2etest.RepoRoot(), "scripts", "dist.sh"))
	cmd.Dir = e2etest.RepoRoot()
	cmd.Env = append(os.Environ(), "DIST_DIR="+dist, "DIST_ARCHES="+runtime.GOARCH, "DIST_COLLECTOR_BIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/dist.sh: %v\n%s", err, out)
	}

	// Every file is in SHA256SUMS with its digest.
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for line := range strings.Lines(string(sums)) {
		want, name, _ := strings.Cut(strings.TrimSpace(line), "  ")
		f, err := os.Open(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, _ = io.Copy(h, f)
		f.Close()
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, want)
		}
		listed++
	}
	wheels, _ := filepath.Glob(filepath.Join(dist, "miles_otel-*.whl"))
	archives, _ := filepath.Glob(filepath.Join(dist, "*_linux_"+runtime.GOARCH+".tar.gz"))
	if len(wheels) != 1 || len(archives) != 2 || listed != 3 {
		t.Fatalf("dist holds wheels %v, archives %v, %d sums; want 1 wheel, 2 archives, 3 sums", wheels, archives, listed)
	}
	for _, a := range archives {
		if out, err := exec.Command("tar", "-C", install, "-xzf", a).CombinedOutput(); err != nil {
			t.Fatalf("tar %s: %v\n%s", a, err, out)
		}
	}

	// The wheel in a fresh venv, offline: the .pth turns the instrumentation on under MILES_OTEL=1 only.
	venv := filepath.Join(install, "venv")
	if out, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v\n%s", err, out)
	}
	py := filepath.Join(venv, "bin", "python")
	if out, err := exec.Command(py, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", wheels[0]).CombinedOutput(); err != nil {
		t.Fatalf("pip install %s: %v\n%s", wheels[0], err, out)
	}
	probe := `import sys; print("miles_otel.instrumentation" in sys.modules)`
	for env, want := range map[string]string{"MILES_OTEL=1": "True", "MILES_OTEL=0": "False"} {
		c := exec.Command(py, "-c", probe)
		c.Env = append(os.Environ(), env)
		if out, err := c.Output(); err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%s: instrumentation loaded at start %q (%v), want %s", env, out, err, want)
		}
	}

	// The archived collector with its archived config, a phase from the venv, the archived dashboard.
	runDir := t.TempDir()
	col := e2etest.StartCollector(t, runDir, e2etest.Options{
		Binary:  filepath.Join(install, "otelcol-miles", "otelcol-miles"),
		Configs: []string{filepath.Join(install, "otelcol-miles", "configs", "run.yaml")},
	})
	emit := exec.Command(py, "-c", `import miles_otel
s = miles_otel.PhaseSink("train", rank=0, gpus=[0])
with s.phase("actor_train"):
    pass
assert miles_otel.flush(10)`)
	emit.Env = append(os.Environ(), "MILES_OTLP_ENDPOINT=http://"+col.HTTPAddr, "MILES_NODE=dist-node")
	if out, err := emit.CombinedOutput(); err != nil {
		t.Fatalf("emit: %v\n%s", err, out)
	}

	addr := e2etest.FreeAddr(t)
	dash := exec.Command(filepath.Join(install, "miles-dashboard", "miles-dashboard"), "serve", "--dir", runDir, "--follow", "--addr", addr, "--no-cache")
	stderr, _ := dash.StderrPipe()
	if err := dash.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(stderr)) }()
	t.Cleanup(func() { _ = dash.Process.Kill(); _ = dash.Wait() })
	now := float64(time.Now().Unix())
	url := fmt.Sprintf("http://%s/api/v1/phases?t0=%.0f&t1=%.0f", addr, now-600, now+600)
	e2etest.Eventually(t, 60*time.Second, "the archived dashboard to serve the phase", func() bool {
		if getStatus(t, url) != http.StatusOK {
			return false
		}
		var ph store.PhasesResult
		getJSON(t, url, &ph)
		return len(ph.Names) == 1 && ph.Names[0] == "actor_train" && len(ph.Lanes) == 1
	})
}

package dumps

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
)

// TestEvilDumpRefused loads a torch.save of an object whose __reduce__ is os.system (written by the fixture
// script with real torch): the decoder must refuse it by name, never reaching the call.
func TestEvilDumpRefused(t *testing.T) {
	a, err := OpenArchive("testdata/evil.pt", "evil.pt", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = indexRollout(a)
	var fe *ForbiddenError
	if !errors.As(err, &fe) || fe.Module != "posix" || fe.Name != "system" {
		t.Fatalf("want a ForbiddenError for posix.system, got %v", err)
	}
	if !strings.Contains(err.Error(), "not on the dump reader's allow-list") {
		t.Fatalf("message: %v", err)
	}
}

// TestCraftedPicklesRefused covers the ways a pickle can name a callable: GLOBAL, STACK_GLOBAL, INST, and the
// extension registry; and allowed names used in ways they may not be.
func TestCraftedPicklesRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		pkl       string
		forbidden string
	}{
		"GLOBAL os.system":           {"cos\nsystem\n(S'touch /tmp/x'\ntR.", "os.system"},
		"GLOBAL builtins.eval":       {"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.", "builtins.eval"},
		"STACK_GLOBAL subprocess":    {"\x80\x04\x8c\nsubprocess\x94\x8c\x05Popen\x94\x93\x94.", "subprocess.Popen"},
		"INST os.system":             {"(S'id'\nios\nsystem\n.", "os.system"},
		"getattr on an allowed name": {"\x80\x02cbuiltins\ngetattr\nctorch\nFloatStorage\nX\x03\x00\x00\x00abc\x86R.", "builtins.getattr"},
		"EXT1":                       {"\x80\x02\x82\x01.", "copyreg.extension registry code"},
		"numpy frombuffer":           {"\x80\x02cnumpy\nfrombuffer\n.", "numpy.frombuffer"},
		"torch.load nested":          {"\x80\x02ctorch\nload\n.", "torch.load"},
	} {
		_, err := Decode([]byte(tc.pkl), DecodeOptions{LazyLists: true})
		var fe *ForbiddenError
		if !errors.As(err, &fe) || fe.Module+"."+fe.Name != tc.forbidden {
			t.Errorf("%s: got %v, want forbidden %s", name, err, tc.forbidden)
		}
	}
	// allowed names can only be used as what they are
	for name, pkl := range map[string]string{
		"storage type called":        "\x80\x02ctorch\nFloatStorage\n)R.",
		"codecs.encode other codec":  "\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.",
		"rebuild without a storage":  "\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(K\x00K\x00)))\x89NtR.",
		"reconstructor non-record":   "\x80\x02ccopyreg\n_reconstructor\nccollections\nOrderedDict\ncbuiltins\nobject\nN\x87R.",
		"persistent id outside zip":  "\x80\x02(X\x07\x00\x00\x00storageQ.",
		"BUILD on an arbitrary list": "\x80\x02]}b.",
	} {
		_, err := Decode([]byte(pkl), DecodeOptions{})
		if _, ok := errors.AsType[*CorruptError](err); !ok {
			t.Errorf("%s: got %v, want a CorruptError", name, err)
		}
	}
}

func copyRun(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(fixtureRun)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestStillWritingThenCorrupt: a truncated dump is "still being written" (retryable) while young, and a clear
// corruption error once it is old.
func TestStillWritingThenCorrupt(t *testing.T) {
	run := copyRun(t)
	p := filepath.Join(run, "rollout_data", "1.pt")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	r := Open(run, Options{Settle: time.Minute})
	defer r.Close()
	_, _, err = r.Acquire(StepKey{ID: 1})
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "rollout_data/1.pt is still being written") {
		t.Fatalf("young truncated file: %v", err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Acquire(StepKey{ID: 1})
	var ce *FileCorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "rollout_data/1.pt is corrupt: not a complete torch zip archive") {
		t.Fatalf("old truncated file: %v", err)
	}
	// a complete zip whose pickle is cut short is corrupt too, named by its file
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "x/data.pkl", Method: zip.Store})
	_, _ = w.Write([]byte("\x80\x02}q\x00(X\x07\x00\x00\x00samples]"))
	_ = zw.Close()
	_ = os.WriteFile(p, zb.Bytes(), 0o644)
	_ = os.Chtimes(p, old, old)
	_, _, err = r.Acquire(StepKey{ID: 1})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "pickle truncated") {
		t.Fatalf("truncated pickle: %v", err)
	}
}

// TestRewrittenStepReopens: a step rewritten on disk is noticed and re-read.
func TestRewrittenStepReopens(t *testing.T) {
	run := copyRun(t)
	r := Open(run, Options{Settle: time.Second, Recheck: time.Nanosecond})
	defer r.Close()
	st, rel, err := r.Acquire(StepKey{ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	n := len(st.Samples)
	rel()
	src, _ := os.ReadFile(filepath.Join(run, "rollout_data", "3.pt"))
	e2etest.WriteUnder(t, run, "rollout_data/2.pt", src)
	st2, rel2, err := r.Acquire(StepKey{ID: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rel2()
	if st2 == st || st2.Samples[0].Index != 200 || len(st2.Samples) != n {
		t.Fatalf("rewritten step not re-read: first index %d", st2.Samples[0].Index)
	}
}

func TestHalfAndBFloat16(t *testing.T) {
	for h, want := range map[uint16]float32{
		0x3C00: 1, 0xC000: -2, 0x7BFF: 65504, 0x0001: 5.9604645e-08, 0x0000: 0,
		0x3555: 0.33325195,
	} {
		if got := halfToFloat(h); got != want {
			t.Errorf("half %#04x = %v, want %v", h, got, want)
		}
	}
	raw := []byte{0x80, 0x3F, 0x40, 0xC0} // bf16 1.0, -3.0
	if got := Float32s(raw, BF16); got[0] != 1 || got[1] != -3 {
		t.Errorf("bf16 %v", got)
	}
}

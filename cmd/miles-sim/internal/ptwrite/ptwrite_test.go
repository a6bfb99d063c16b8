package ptwrite

import (
	"archive/zip"
	"bytes"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
)

// The dashboard's reader (the strict, allow-listed decoder) reads back every kind of value the writer emits.
func TestRoundTripThroughDashboardReader(t *testing.T) {
	long := make([]int64, 2500) // more than one APPENDS batch
	for i := range long {
		long[i] = int64(i * 37)
	}
	obj := NewDict(
		"rollout_id", 3,
		"big", int64(1)<<40,
		"neg", -70000,
		"f", -0.25,
		"ok", true,
		"none", nil,
		"name", "héllo",
		"ints", long,
		"floats", []float64{-0.5, 0, 1.5},
		"strs", []string{"1", "2", "1"},
		"tuple", Tuple{1, 2, 3, 4},
		"nested", []any{NewDict("k", "v"), []any{}},
		"t_long", LongTensor([]int64{5, 6, 7}),
		"t_int", IntTensor([]int32{1, 0, 1}),
		"t_float", FloatTensor([]float32{-0.125, 2.5}),
		"t_empty", FloatTensor(nil),
	)
	path := filepath.Join(t.TempDir(), "3_1.pt")
	if _, err := WriteFile(path, obj); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Method != zip.Store {
			t.Errorf("%s is compressed", f.Name)
		}
		off, err := f.DataOffset()
		if err != nil || off%64 != 0 {
			t.Errorf("%s data at %d, want a multiple of 64 (%v)", f.Name, off, err)
		}
	}
	zr.Close()
	want := "3_1/data.pkl 3_1/byteorder 3_1/data/0 3_1/data/1 3_1/data/2 3_1/data/3 3_1/version"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("records %q, want %q", got, want)
	}

	a, err := dumps.OpenArchive(path, "3_1.pt", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := a.PickleBytes()
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Decode(b, dumps.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*dumps.Dict)
	get := func(k string) any {
		x, ok := d.Get(k)
		if !ok {
			t.Fatalf("key %s missing", k)
		}
		return x
	}
	if get("rollout_id") != int64(3) || get("big") != int64(1)<<40 || get("neg") != int64(-70000) ||
		get("f") != -0.25 || get("ok") != true || get("none") != nil || get("name") != "héllo" {
		t.Errorf("scalars: %v %v %v %v %v %v %v", get("rollout_id"), get("big"), get("neg"), get("f"), get("ok"),
			get("none"), get("name"))
	}
	ints := get("ints").(*dumps.List)
	if ints.Len() != len(long) || ints.Items[2499] != long[2499] {
		t.Errorf("ints: %d items", ints.Len())
	}
	if s := get("strs").(*dumps.List); len(s.Items) != 3 || s.Items[2] != "1" {
		t.Errorf("strs: %v", s.Items)
	}
	if tu := get("tuple").(dumps.Tuple); len(tu) != 4 || tu[3] != int64(4) {
		t.Errorf("tuple: %v", tu)
	}
	checkTensor := func(k string, dt dumps.DType, want []float64) {
		ten := get(k).(*dumps.Tensor)
		if ten.DType != dt || ten.Numel() != int64(len(want)) {
			t.Fatalf("%s: %s of %d", k, ten.DType, ten.Numel())
		}
		raw, err := a.TensorRaw(ten, 0, ten.Numel())
		if err != nil {
			t.Fatal(err)
		}
		got := dumps.Float32s(raw, dt)
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 0 {
				t.Errorf("%s[%d] = %v, want %v", k, i, got[i], want[i])
			}
		}
	}
	checkTensor("t_long", dumps.I64, []float64{5, 6, 7})
	checkTensor("t_int", dumps.I32, []float64{1, 0, 1})
	checkTensor("t_float", dumps.F32, []float64{-0.125, 2.5})
	checkTensor("t_empty", dumps.F32, nil)
}

func TestIntEncodings(t *testing.T) {
	for _, x := range []int64{
		0, 255, 256, 65535, 65536, -1, math.MinInt32, math.MaxInt32, 1 << 31, -(1 << 31) - 1,
		math.MaxInt64, math.MinInt64, 128, -128, 1 << 40,
	} {
		b, _, err := Pickle(x)
		if err != nil {
			t.Fatal(err)
		}
		v, err := dumps.Decode(b, dumps.DecodeOptions{})
		if err != nil || v != x {
			t.Errorf("%d: got %v (%v)", x, v, err)
		}
	}
}

// Signed tensor elements are stored as their little-endian two's complement.
func TestSignedTensorBytes(t *testing.T) {
	if got, want := IntTensor([]int32{-1, math.MinInt32, 2}).Data, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x80, 2, 0, 0, 0}; !bytes.Equal(got, want) {
		t.Errorf("IntTensor bytes % x, want % x", got, want)
	}
	if got, want := LongTensor([]int64{-2, 1 << 40}).Data, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 0, 0}; !bytes.Equal(got, want) {
		t.Errorf("LongTensor bytes % x, want % x", got, want)
	}
}

// A field that does not fit the zip format is an error, not a wrapped value.
func TestZipNameTooLong(t *testing.T) {
	if _, err := Write(io.Discard, strings.Repeat("n", 1<<16), NewDict("k", 1)); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("got %v, want a name-too-long error", err)
	}
}

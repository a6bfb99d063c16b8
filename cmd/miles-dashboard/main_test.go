package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExposureRefused: beyond loopback a real token is required; a blank one, or one an Authorization header
// cannot carry, is refused everywhere.
func TestExposureRefused(t *testing.T) {
	for _, tc := range []struct {
		addr, token, want string
	}{
		{"0.0.0.0:7788", "", "not loopback"},
		{"[::]:7788", "", "not loopback"},
		{":7788", "", "not loopback"},
		{"10.0.0.5:7788", "", "not loopback"},
		{"0.0.0.0:7788", "   ", "white space"},
		{"0.0.0.0:7788", "\t\n", "white space"},
		{"127.0.0.1:7788", " ", "white space"},
		{"0.0.0.0:7788", " tok", "starts or ends"},
		{"nonsense", "t", "--addr"},
		// Beyond loopback a token must be long enough not to be guessed by trying.
		{"0.0.0.0:7788", "x", "at least 16"},
		{"10.0.0.5:7788", "tok", "at least 16"},
		{"0.0.0.0:7788", "0123456789abcdef", ""},
		{"127.0.0.1:7788", "tok", ""}, // loopback: any token is an extra, not the only guard
		{"127.0.0.1:7788", "", ""},
		{"[::1]:7788", "", ""},
		{"localhost:7788", "", ""},
	} {
		err := checkExposure(tc.addr, tc.token)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s token %q: %v, want %q", tc.addr, tc.token, err, tc.want)
		}
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStartLineHidesToken: the start-up lines say how to pass the token and never print it.
func TestStartLineHidesToken(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "dashboard"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard/meta.json"), []byte(`{"writer":"otelcol-miles"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dir", dir, "--addr", "127.0.0.1:0", "--token", "hunter2-token", "--no-cache"}, &out, io.Discard)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "Bearer") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "hunter2") {
		t.Errorf("the token is printed: %s", s)
	}
	if !strings.Contains(s, "?token=<your token>") || !strings.Contains(s, "Authorization: Bearer") {
		t.Errorf("no word on how to pass the token: %s", s)
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false},
		{"2GiB", 2 << 30, false},
		{"512 MiB", 512 << 20, false},
		{"1gb", 1e9, false},
		{"4096", 4096, false},
		{"1KiB", 1024, false},
		{"", 0, true},
		{"-1GiB", 0, true},
		{"2 GiBs", 0, true},
		{"1.5GiB", 0, true},
		{"9999999TiB", 0, true},
	} {
		got, err := parseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want && !tc.err {
			t.Errorf("parseBytes(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

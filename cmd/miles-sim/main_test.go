package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "sync", "--fast-forward"}, `mode "sync"`},
		{[]string{"--steps", "2"}, "--run-dir is required"},
		{[]string{"--fast-forward", "--gpus-per-engine", "3"}, "must divide"},
		{[]string{"--fast-forward", "--start", "yesterday"}, "--start"},
		{[]string{"--fast-forward", "extra"}, "unexpected arguments"},
		{[]string{"--fast-forward", "--fault", "oom"}, `unknown fault "oom"`},
		{[]string{"--fast-forward", "--fault", "straggler-rank=8", "--gpus-per-node", "4"}, "the run has 4 train ranks"},
		{[]string{"--fast-forward", "--dump-details", t.TempDir(), "--dump-tp", "3"}, "does not divide the run's 8 train ranks"},
		{[]string{"--fast-forward", "--dump-details", t.TempDir(), "--dump-max-tokens", "10"}, "at least 64"},
	} {
		err := run(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"/tmp/runs/exp7/": "exp7", "exp7": "exp7", "/a/b": "b"} {
		if got := baseName(in); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
}

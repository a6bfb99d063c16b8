package fakesglang

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPauseHoldsNewRequests: between POST /pause_generation and POST /continue_generation (miles' weight sync) a
// new /generate request waits, and is answered once generation continues; /flush_cache answers 200.
func TestPauseHoldsNewRequests(t *testing.T) {
	srv, err := Serve(NewEngine(Config{}), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	srv.EnableGenerate(GenerateConfig{MaxNewTokens: 2}, nil, nil)
	post := func(path, body string) int {
		resp, err := http.Post(srv.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/pause_generation", `{"mode":"retract"}`); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	var continued atomic.Bool
	done := make(chan int)
	go func() { done <- post("/generate", `{"text":"hi","sampling_params":{"max_new_tokens":2}}`) }()
	select {
	case code := <-done:
		t.Fatalf("a request was answered (%d) while generation was paused", code)
	case <-time.After(100 * time.Millisecond):
	}
	resp, err := http.Get(srv.URL() + "/flush_cache")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("flush_cache: %d", resp.StatusCode)
	}
	continued.Store(true)
	if code := post("/continue_generation", `{}`); code != 200 {
		t.Fatalf("continue: %d", code)
	}
	if code := <-done; code != 200 || !continued.Load() {
		t.Fatalf("held request: %d", code)
	}
}

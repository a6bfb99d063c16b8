package semconv

import (
	"encoding/json"
	"os"
	"testing"
)

// TestSecretRule: the secret rule and the URL rule against the table python/tests reads too, so the emitter and
// the exporter redact the same arguments.
func TestSecretRule(t *testing.T) {
	b, err := os.ReadFile("testdata/run_config_secrets.json")
	if err != nil {
		t.Fatal(err)
	}
	var tab struct {
		Secret    []string    `json:"secret"`
		NotSecret []string    `json:"not_secret"`
		URLs      [][2]string `json:"urls"`
	}
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Secret) < 5 || len(tab.NotSecret) < 5 || len(tab.URLs) < 3 {
		t.Fatal("the table is not read")
	}
	for _, k := range tab.Secret {
		if !SecretArg(k) {
			t.Errorf("%q should be a secret", k)
		}
	}
	for _, k := range tab.NotSecret {
		if SecretArg(k) {
			t.Errorf("%q should not be a secret", k)
		}
	}
	for _, u := range tab.URLs {
		if got := RedactURLUserinfo(u[0]); got != u[1] {
			t.Errorf("RedactURLUserinfo(%q) = %q, want %q", u[0], got, u[1])
		}
	}
}

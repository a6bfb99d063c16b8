package store

import (
	"fmt"
	"strings"
	"testing"
)

// TestEnginesAppearingLateAreFollowed: the key catalog was built before any engine was scraped (engines
// register after the trainer starts); engine series written afterwards still reach the catalog on refresh.
func TestEnginesAppearingLateAreFollowed(t *testing.T) {
	dir := v2Run(t)
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	hasSglang := func() bool {
		keys, _, _ := st.MetricKeys()
		for _, k := range keys {
			if strings.HasPrefix(k.Key, "sglang:") {
				return true
			}
		}
		return false
	}
	if hasSglang() {
		t.Fatal("sglang keys before any engine was scraped")
	}
	write(t, dir, "dashboard/engine_series/"+hourA+".jsonl",
		fmt.Sprintf(`{"ts":%.0f,"addr":"http://e:1","m":{"sglang:num_running_reqs":3}}`+"\n", h0+5)+
			fmt.Sprintf(`{"ts":%.0f,"addr":"http://e:1","m":{"sglang:num_running_reqs":4}}`+"\n", h0+7))
	st.Refresh()
	if !hasSglang() {
		t.Fatal("engine series written after the catalog was built never appeared")
	}
}

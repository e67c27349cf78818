package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// validDebounce refuses each bad debounce with an error naming what is
// wrong, and accepts the bounds.
func TestDebounceValid(t *testing.T) {
	t.Parallel()
	ok := flowtype.Debounce{Key: "k", Window: time.Second}
	for _, tt := range []struct {
		name string
		p    StartParams
		want string // "" accepts it
	}{
		{"none", StartParams{}, ""},
		{"plain", StartParams{Debounce: &ok}, ""},
		{"max delay equal to window", StartParams{Debounce: &flowtype.Debounce{Key: "k", Window: time.Second, MaxDelay: time.Second}}, ""},
		{"drop", StartParams{Debounce: &flowtype.Debounce{Key: "k", Window: time.Millisecond, Mode: flowtype.DebounceDrop}}, ""},
		{"key at the limit", StartParams{Debounce: &flowtype.Debounce{Key: strings.Repeat("k", MaxDebounceKey), Window: time.Second}}, ""},
		{"sub-millisecond window", StartParams{Debounce: &flowtype.Debounce{Key: "k", Window: time.Microsecond}}, "under the millisecond"},
		{"max delay under window", StartParams{Debounce: &flowtype.Debounce{Key: "k", Window: time.Minute, MaxDelay: time.Second}}, "max delay 1s is shorter than its window 1m0s"},
		{"child", StartParams{Debounce: &ok, ParentID: "p"}, "a child cannot be debounced"},
	} {
		err := validDebounce(&tt.p)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// The run_started event of a debounced run names its debounce.
func TestDebounceDetail(t *testing.T) {
	t.Parallel()
	p := &StartParams{Debounce: &flowtype.Debounce{Key: "k", Window: time.Second, MaxDelay: time.Minute, Mode: flowtype.DebounceDrop}}
	if got, want := debounceDetail(p), `, debounce key "k" (drop, window 1s, max delay 1m0s)`; got != want {
		t.Errorf("detail %q, want %q", got, want)
	}
	if got := debounceDetail(&StartParams{}); got != "" {
		t.Errorf("detail without a debounce %q, want none", got)
	}
}

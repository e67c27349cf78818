package flowtype_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// A rate and a key limit read back what String wrote, and bad ones are
// refused naming what is wrong.
func TestLimitTextRoundTrip(t *testing.T) {
	r := flowtype.RateLimit{Limit: 100, Period: 1500 * time.Millisecond}
	if got, err := flowtype.ParseRateLimit(r.String()); err != nil || got != r {
		t.Errorf("ParseRateLimit(%q) = %+v, %v", r.String(), got, err)
	}
	if got, err := flowtype.ParseRateLimit("10/m"); err != nil || got != (flowtype.RateLimit{Limit: 10, Period: time.Minute}) {
		t.Errorf("ParseRateLimit(10/m) = %+v, %v", got, err)
	}
	k := flowtype.KeyLimit{Prefix: "vip-a=b", Concurrency: 3, Weight: 4, Rate: r}
	if got, err := flowtype.ParseKeyLimit(k.String()); err != nil || got != k {
		t.Errorf("ParseKeyLimit(%q) = %+v, %v", k.String(), got, err)
	}
	for _, bad := range []string{"", "x/1s", "0/1s", "5/0s", "5/soon"} {
		if _, err := flowtype.ParseRateLimit(bad); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseRateLimit(%q) = %v, want an error quoting it", bad, err)
		}
	}
	for _, bad := range []string{"tenant", "=3", "t=x", "t=3,weight=0", "t=3,size=2", "t=3,rate=9"} {
		if _, err := flowtype.ParseKeyLimit(bad); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseKeyLimit(%q) = %v, want an error quoting it", bad, err)
		}
	}
}

// ForKey picks the longest matching prefix, else the queue's defaults;
// Validate names each bad field.
func TestQueueLimitsForKeyAndValidate(t *testing.T) {
	l := flowtype.QueueLimits{KeyConcurrency: 1, Keys: []flowtype.KeyLimit{
		{Prefix: "a", Concurrency: 2}, {Prefix: "ab", Concurrency: 3, Weight: 5},
	}}
	for key, want := range map[string]flowtype.KeyLimit{
		"abc": {Prefix: "ab", Concurrency: 3, Weight: 5},
		"ax":  {Prefix: "a", Concurrency: 2, Weight: 1},
		"z":   {Concurrency: 1, Weight: 1},
		"":    {Weight: 1},
	} {
		if got := l.ForKey(key); got != want {
			t.Errorf("ForKey(%q) = %+v, want %+v", key, got, want)
		}
	}
	err := flowtype.QueueLimits{Concurrency: -1, Rate: flowtype.RateLimit{Limit: 2},
		Keys: []flowtype.KeyLimit{{Prefix: "a"}, {Prefix: "a", Weight: -1}}}.Validate()
	for _, want := range []string{"negative Concurrency", "Rate: Limit 2 needs a Period", "prefix listed twice", "negative Weight"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
}

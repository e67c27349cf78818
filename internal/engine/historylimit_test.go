package engine

import (
	"testing"

	"github.com/flowlite/flowlite/internal/store"
)

// The history limits are generous by default, and negative turns them off.
func TestHistoryLimitDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.MaxHistoryCalls != 50_000 || c.MaxHistoryBytes != 50<<20 {
		t.Errorf("defaults %d calls, %d bytes; want 50,000 and 50 MiB", c.MaxHistoryCalls, c.MaxHistoryBytes)
	}
	off := Config{MaxHistoryCalls: -1, MaxHistoryBytes: -1}.withDefaults()
	if off.MaxHistoryCalls != -1 || off.MaxHistoryBytes != -1 {
		t.Errorf("negative limits became %d, %d", off.MaxHistoryCalls, off.MaxHistoryBytes)
	}
	st := &runState{x: &execution{e: &Engine{cfg: off, log: off.Logger}}, size: historySize{calls: 1 << 40, bytes: 1 << 40}}
	if err := st.admitCall(store.StepKey{RunID: "r", Name: "s"}, nil); err != nil {
		t.Errorf("a call was refused with the limits off: %v", err)
	}
}

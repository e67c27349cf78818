package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

var schedEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// latestSlot's look-back over doubling windows finds the same slot as
// walking every slot from the first due one.
func TestLatestSlotMatchesWalk(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		spec   string
		window time.Duration // how far after the first due slot now may be
	}{
		{"* * * * * *", 2 * time.Hour},
		{"*/7 * * * * *", 6 * time.Hour},
		{"* 0 * * * *", 48 * time.Hour},
		{"0 0 9 * * 1-5", 40 * 24 * time.Hour},
		{"@every 90s", 40 * 24 * time.Hour},
		{"30 2 1 * *", 400 * 24 * time.Hour},
		{"CRON_TZ=Europe/Paris 0 9 * * *", 400 * 24 * time.Hour},
	}
	for _, tt := range tests {
		spec := tt.spec
		sched, err := ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		for range 30 {
			from := nextSlot(sched, schedEpoch+rng.Int64N(int64(30*24*time.Hour/time.Millisecond)))
			now := from + rng.Int64N(tt.window.Milliseconds())
			want := from
			for n := nextSlot(sched, want); n <= now; n = nextSlot(sched, n) {
				want = n
			}
			if got := latestSlot(sched, from, now); got != want {
				t.Fatalf("%s from %s to %s: latest slot %s, want %s", spec, ms(from), ms(now), ms(got), ms(want))
			}
		}
	}
}

func TestPlanSlots(t *testing.T) {
	t.Parallel()
	perSecond, _ := ParseSpec("* * * * * *")
	sec := func(n int64) int64 { return schedEpoch + n*1000 }
	tests := []struct {
		name    string
		nextAt  int64
		now     int64
		policy  flowtype.CatchUp
		resumed bool
		max     int
		slots   []int64
		next    int64
	}{
		{"not due", sec(5), sec(4), flowtype.CatchUpOne, false, 10, nil, sec(5)},
		{"one due", sec(5), sec(5) + 300, flowtype.CatchUpNone, false, 10, []int64{sec(5)}, sec(6)},
		{"late within grace", sec(5), sec(8), flowtype.CatchUpNone, false, 10, []int64{sec(5), sec(6), sec(7), sec(8)}, sec(9)},
		{"within grace, capped", sec(5), sec(8), flowtype.CatchUpOne, false, 2, []int64{sec(5), sec(6)}, sec(7)},
		{"behind, one", sec(5), sec(500), flowtype.CatchUpOne, false, 10, []int64{sec(500)}, sec(501)},
		{"behind, none", sec(5), sec(500) + 999, flowtype.CatchUpNone, false, 10, nil, sec(501)},
		{"behind, all, capped", sec(5), sec(500), flowtype.CatchUpAll, false, 3, []int64{sec(5), sec(6), sec(7)}, sec(8)},
		{"resumed, one", sec(5), sec(8), flowtype.CatchUpOne, true, 10, []int64{sec(8)}, sec(9)},
		{"resumed, none", sec(5), sec(8), flowtype.CatchUpNone, true, 10, nil, sec(9)},
		{"resumed, all", sec(5), sec(7), flowtype.CatchUpAll, true, 10, []int64{sec(5), sec(6), sec(7)}, sec(8)},
	}
	for _, tt := range tests {
		slots, next := planSlots(perSecond, tt.nextAt, tt.now, tt.policy, tt.resumed, tt.max)
		if !slices.Equal(slots, tt.slots) || next != tt.next {
			t.Errorf("%s: slots %v, next %d; want %v, %d", tt.name, slots, next, tt.slots, tt.next)
		}
	}
}

func TestNextSlotNever(t *testing.T) {
	t.Parallel()
	feb30, err := ParseSpec("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if got := nextSlot(feb30, schedEpoch); got != NeverMs {
		t.Fatalf("next slot of Feb 30 = %d, want NeverMs", got)
	}
	if slots, next := planSlots(feb30, NeverMs, schedEpoch, flowtype.CatchUpAll, false, 10); slots != nil || next != NeverMs {
		t.Fatalf("plan of a schedule that never fires: %v, %d", slots, next)
	}
}

func ms(v int64) string { return time.UnixMilli(v).UTC().Format(time.RFC3339) }

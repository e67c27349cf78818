package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestNoBeatAfterDone: when a beat outlasts the interval, the next tick is
// ready by the time done is closed; the loop must stop rather than beat
// once more, which on an unreachable database holds up the end of an
// execution, and the engine's Stop, for one more slow write. Before the
// fix select chose between the two at random, so half of these rounds
// beat twice.
func TestNoBeatAfterDone(t *testing.T) {
	t.Parallel()
	for round := range 40 {
		var beats atomic.Int32
		inBeat := make(chan struct{})
		release := make(chan struct{})
		done := make(chan struct{})
		finished := beatEvery(t.Context(), done, time.Millisecond, func() {
			if beats.Add(1) == 1 {
				close(inBeat)
				<-release // a slow write, during which ticks come
			}
		})
		<-inBeat
		time.Sleep(5 * time.Millisecond)
		close(done)
		close(release)
		<-finished
		if n := beats.Load(); n != 1 {
			t.Fatalf("round %d: %d beats, want 1: the loop beat again after done", round, n)
		}
	}
}

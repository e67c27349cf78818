package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Step progress: a step body reports how far it got (SetProgress) as often
// as it likes, which costs a lock and a copy; the latest value of each
// attempt waits here and is written, for every attempt that changed, in one
// write transaction per flush (progressFlushInterval), as a step_progress
// event fenced by the run's lease (store.EventTx.EventAppendLeased). The
// attempt's last value rides with its outcome. A long attempt is sampled
// less often as it ages (progressGap), so its history stays short however
// long it runs and however often it reports.

// ErrNotInStep is returned by SetProgress and WriteStreamStep outside a
// step body or a job's handler, or after its attempt ended.
var ErrNotInStep = errors.New("not called from a running step body or job handler")

// progressFlushInterval is how often the engine writes the progress its
// attempts reported since the last write.
const progressFlushInterval = 200 * time.Millisecond

// progressAgeDivisor sets how often an old attempt's progress is written:
// at most every age/progressAgeDivisor, so an attempt's history holds on
// the order of progressAgeDivisor samples per tenfold of its age.
const progressAgeDivisor = 20

// MaxProgressMessage is the longest Message kept, in bytes; a longer one is
// cut at a character boundary.
const MaxProgressMessage = 512

// progressSlot holds the latest progress of one step attempt.
type progressSlot struct {
	x       *execution
	key     store.StepKey
	attempt int
	begun   time.Time // real time: the sampling gap grows with it

	mu         sync.Mutex
	latest     flowtype.Progress
	dirty      bool          // latest is not written yet
	registered bool          // on the engine's board
	ended      bool          // the attempt's body returned
	wroteAt    time.Time     // of the last sample taken
	writing    chan struct{} // closed once the sample being written is
}

type progressKey struct{}

// newProgress returns the slot of an attempt of key, which its body's
// context carries (see callStep).
func (x *execution) newProgress(key store.StepKey, attempt int) *progressSlot {
	return &progressSlot{x: x, key: key, attempt: attempt, begun: time.Now()}
}

// endProgress ends the attempt of s and queues its last progress, when it
// was not written yet, for the execution's next write (the attempt's
// outcome) to carry.
func (x *execution) endProgress(s *progressSlot) {
	if ev := s.end(false); ev != nil {
		x.later(checkpoint{progress: ev, step: store.StepCompleteParams{Now: x.e.nowMs()}})
	}
}

// SetProgress records p as the latest progress of the step attempt ctx
// belongs to.
func SetProgress(ctx context.Context, p flowtype.Progress) error {
	s, ok := ctx.Value(progressKey{}).(*progressSlot)
	if !ok {
		return fmt.Errorf("set progress: %w", ErrNotInStep)
	}
	if p.Done < 0 || p.Total < 0 {
		return fmt.Errorf("set progress of step %s: negative done %d or total %d", s.key.Name, p.Done, p.Total)
	}
	if len(p.Message) > MaxProgressMessage {
		p.Message = cutMessage(p.Message)
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return fmt.Errorf("set progress of step %s: attempt %d ended: %w", s.key.Name, s.attempt, ErrNotInStep)
	}
	s.latest, s.dirty = p, true
	first := !s.registered
	s.registered = true
	s.mu.Unlock()
	if first {
		s.x.e.progress.add(s)
	}
	return nil
}

// cutMessage shortens m to at most MaxProgressMessage bytes of whole
// characters.
func cutMessage(m string) string {
	m = m[:MaxProgressMessage]
	for len(m) > 0 && !utf8.ValidString(m) {
		m = m[:len(m)-1]
	}
	return m
}

// end marks the attempt ended and returns the event of its last progress
// when it was not written yet, for its outcome to carry. A sample being
// written is waited for, so that the history orders it before the outcome;
// inside a write transaction (inTx: a RunTx step's checkpoint), which that
// write may be waiting for, the last value is returned again instead, so
// that it is recorded whether or not that write commits.
func (s *progressSlot) end(inTx bool) *store.Event {
	s.mu.Lock()
	s.ended = true
	writing, registered := s.writing, s.registered
	s.mu.Unlock()
	if !registered {
		return nil
	}
	if writing != nil && !inTx {
		<-writing
	}
	s.x.e.progress.remove(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty && (s.writing == nil || !inTx) {
		return nil
	}
	s.dirty = false
	ev := s.event(s.latest)
	return &ev
}

func (s *progressSlot) event(p flowtype.Progress) store.Event {
	return store.Event{Kind: flowtype.EventStepProgress, Step: s.key.Name, Occurrence: s.key.Occurrence,
		Attempt: s.attempt, Detail: flowtype.EncodeProgress(p)}
}

// progressGap is how long after its last sample an attempt of age is
// sampled again: the flush interval, growing with age up to the heartbeat
// interval (the pace a lease is renewed at, which no reader of a long
// attempt expects to beat).
func progressGap(age, heartbeat time.Duration) time.Duration {
	return min(max(age/progressAgeDivisor, progressFlushInterval), max(heartbeat, progressFlushInterval))
}

// progressBoard holds the slots of this engine's attempts that reported
// progress, until they end.
type progressBoard struct {
	mu    sync.Mutex
	slots map[*progressSlot]struct{}
}

func (b *progressBoard) add(s *progressSlot) {
	b.mu.Lock()
	if b.slots == nil {
		b.slots = make(map[*progressSlot]struct{})
	}
	b.slots[s] = struct{}{}
	b.mu.Unlock()
}

func (b *progressBoard) remove(s *progressSlot) {
	b.mu.Lock()
	delete(b.slots, s)
	b.mu.Unlock()
}

// progressSample is a value taken from a slot for one flush.
type progressSample struct {
	slot *progressSlot
	ev   store.Event
	done chan struct{}
}

// take returns the samples due at now, marking them being written.
func (b *progressBoard) take(now time.Time, heartbeat time.Duration) []progressSample {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []progressSample
	for s := range b.slots {
		s.mu.Lock()
		if s.dirty && !s.ended && s.writing == nil && now.Sub(s.wroteAt) >= progressGap(now.Sub(s.begun), heartbeat) {
			done := make(chan struct{})
			out = append(out, progressSample{slot: s, ev: s.event(s.latest), done: done})
			s.dirty, s.writing, s.wroteAt = false, done, now
		}
		s.mu.Unlock()
	}
	return out
}

// settle ends the write of samples: on failure each slot is dirty again,
// unless it holds a newer value already, which is dirty anyway.
func settle(samples []progressSample, err error) {
	for _, sm := range samples {
		s := sm.slot
		s.mu.Lock()
		if err != nil {
			s.dirty = true
		}
		s.writing = nil
		s.mu.Unlock()
		close(sm.done)
	}
}

// runProgressFlusher writes the progress reported here, every
// progressFlushInterval, until ctx ends; the attempts still running then
// write their last value with their outcome.
func (e *Engine) runProgressFlusher(ctx context.Context) {
	tick := time.NewTicker(progressFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			e.flushProgress(ctx)
		}
	}
}

// flushProgress writes the due samples of every attempt in one write
// transaction; a run whose lease was lost is skipped.
func (e *Engine) flushProgress(ctx context.Context) {
	samples := e.progress.take(time.Now(), e.cfg.HeartbeatInterval)
	if len(samples) == 0 {
		return
	}
	err := e.store.Write(ctx, func(tx store.Tx) error {
		now := e.nowMs()
		for _, sm := range samples {
			ev := sm.ev
			ev.RunID, ev.At = sm.slot.x.run.ID, now
			if _, err := tx.EventAppendLeased(ctx, sm.slot.x.lease, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		e.log.Warn("write step progress", "attempts", len(samples), "err", err)
	}
	settle(samples, err)
}

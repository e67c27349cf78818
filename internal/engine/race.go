package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Race runs branches against each other: the first branch to succeed is
// recorded as the winner, with its output, and the others' contexts are
// cancelled with ErrLostRace. The record makes the race deterministic: a
// replay returns the recorded winner, and its branches only replay their
// recorded calls (so that the steps they completed can be compensated),
// never execute new ones.
type Race struct {
	rc       *RunContext
	key      store.StepKey
	Branches []*RunContext
	cancels  []context.CancelCauseFunc

	mu     sync.Mutex
	winner int // -1 until known
	output []byte
}

type raceWin struct {
	Branch int             `json:"branch"`
	Output json.RawMessage `json:"output"`
}

// NewRace prepares a race of n branches in this context.
func (rc *RunContext) NewRace(n int) (*Race, error) {
	key, rec, err := rc.lookup("flow.first", nil)
	if err != nil {
		return nil, err
	}
	r := &Race{rc: rc, key: key, winner: -1}
	if rec != nil {
		var w raceWin
		if err := json.Unmarshal(rec.Output, &w); err != nil {
			return nil, rc.Abort(&flowtype.DecodeError{RunID: key.RunID, Step: key.Name, What: "output", Type: "race winner", Err: err})
		}
		r.winner, r.output = w.Branch, w.Output
	}
	for i := range n {
		ctx, cancel := context.WithCancelCause(rc.Context)
		r.cancels = append(r.cancels, cancel)
		r.Branches = append(r.Branches, &RunContext{
			Context:     ctx,
			st:          rc.st,
			scope:       fmt.Sprintf("%sfirst%d.%d/", rc.scope, key.Occurrence, i),
			occurrences: make(map[string]int),
			settled:     r.winner >= 0,
			cscope:      rc.cscope,
		})
	}
	return r, nil
}

// Winner returns the winning branch and its output, or -1.
func (r *Race) Winner() (int, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.winner, r.output
}

// Claim records branch i as the winner with its encoded output, unless a
// branch won before, and cancels the other branches. It reports whether i
// is the winner.
func (r *Race) Claim(i int, output []byte) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.winner >= 0 {
		return r.winner == i, nil
	}
	data, err := json.Marshal(raceWin{Branch: i, Output: output})
	if err != nil {
		return false, r.rc.Abort(&DefinitionError{RunID: r.key.RunID, Problem: fmt.Sprintf("race winner: %v", err)})
	}
	x := r.rc.st.x
	err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: r.key, Input: []byte("null"), Position: r.rc.st.position(r.key), Now: now}); err != nil {
			return err
		}
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: r.key, Output: data, Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventRaceWon, Step: r.key.Name, Occurrence: r.key.Occurrence, Detail: fmt.Sprintf("branch %d", i)})
	})
	if err != nil {
		return false, r.rc.Abort(err)
	}
	r.winner, r.output = i, output
	for j, cancel := range r.cancels {
		if j != i {
			cancel(ErrLostRace)
		}
	}
	return true, nil
}

// Close releases the branches' contexts.
func (r *Race) Close() {
	for _, cancel := range r.cancels {
		cancel(nil)
	}
}

// lostRace reports whether this context is a race branch another branch won.
func (rc *RunContext) lostRace() bool {
	return errors.Is(context.Cause(rc.Context), ErrLostRace)
}

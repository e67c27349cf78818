package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// stepTests are the conformance tests of store.StepReader and
// store.StepTx; Exercise runs them with the others.
func stepTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"StepBegin", testStepBegin},
		{"StepBeginNew", testStepBeginNew},
		{"StepBeginMany", testStepBeginMany},
		{"StepComplete", testStepComplete},
		{"StepFail", testStepFail},
		{"StepCancel", testStepCancel},
		{"StepCompensationArm", testStepCompensationArm},
		{"StepCompensation", testStepCompensation},
	}
}

// testStepBeginNew checks that New changes nothing StepBegin reports or
// records, whether the step has a record or not.
func testStepBeginNew(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	charge := store.StepKey{RunID: "r", Name: "charge", Occurrence: 0}
	begin := func(now int64) (int, error) {
		var n int
		err := s.Write(t.Context(), func(tx store.Tx) error {
			var err error
			n, err = tx.StepBegin(t.Context(), store.StepBeginParams{Key: charge, Input: []byte(`{"cents":100}`), Position: 2, Now: now, New: true})
			return err
		})
		return n, err
	}
	if n, err := begin(base); n != 1 || err != nil {
		t.Fatalf("first StepBegin with New = %d, %v; want 1", n, err)
	}
	checkStep(t, s, store.Step{
		RunID: "r", Name: "charge", Status: store.StepRunning, Attempts: 1, Input: []byte(`{"cents":100}`),
		Compensation: store.CompensationNone, StartedAt: base, Position: 2,
	})
	// The record exists (an interrupted attempt): New still counts a new one.
	if n, err := begin(base + 10); n != 2 || err != nil {
		t.Errorf("StepBegin with New of a running step = %d, %v; want 2", n, err)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: charge, Error: "timeout", Now: base + 20})
	})
	if n, err := begin(base + 30); n != 3 || err != nil {
		t.Errorf("StepBegin with New of a retrying step = %d, %v; want 3", n, err)
	}
	completeStep(t, s, charge, `"ch_1"`, false, base+40)
	done := step(t, s, charge)
	if _, err := begin(base + 50); !errors.Is(err, flowtype.ErrConflict) {
		t.Errorf("StepBegin with New of a completed step: error %v, want ErrConflict", err)
	}
	checkStep(t, s, done)
}

// testStepBeginMany checks that StepBeginMany begins each step as
// StepBegin would: new ones at attempt 1 with their input and position,
// existing ones at their next attempt, with or without New, in the order
// given; a finished step fails the call.
func testStepBeginMany(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"), newRun("b"))
	again := store.StepKey{RunID: "b", Name: "again"}
	beginStep(t, s, again, `{}`, base)
	fresh := store.StepKey{RunID: "a", Name: "fresh"}
	unmarked := store.StepKey{RunID: "a", Name: "unmarked", Occurrence: 1}
	var attempts []int
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		attempts, err = tx.StepBeginMany(ctx, []store.StepBeginParams{
			{Key: fresh, Input: []byte(`{"n":1}`), Position: 0, Now: base + 1, New: true},
			{Key: again, Input: []byte(`{}`), Position: -1, Now: base + 2, New: true},
			{Key: unmarked, Input: []byte{0xff, 0x00}, Position: 3, Now: base + 3},
		})
		return err
	})
	if !slices.Equal(attempts, []int{1, 2, 1}) {
		t.Errorf("attempts %v, want [1 2 1]", attempts)
	}
	checkStep(t, s, store.Step{
		RunID: "a", Name: "fresh", Status: store.StepRunning, Attempts: 1, Input: []byte(`{"n":1}`),
		Compensation: store.CompensationNone, StartedAt: base + 1, Position: 0,
	})
	checkStep(t, s, store.Step{
		RunID: "a", Name: "unmarked", Occurrence: 1, Status: store.StepRunning, Attempts: 1, Input: []byte{0xff, 0x00},
		Compensation: store.CompensationNone, StartedAt: base + 3, Position: 3,
	})
	if st := step(t, s, again); st.Attempts != 2 || st.Status != store.StepRunning {
		t.Errorf("step %s begun again: %+v; want running, 2 attempts", again, st)
	}

	completeStep(t, s, fresh, `"ok"`, false, base+4)
	done := step(t, s, fresh)
	err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.StepBeginMany(t.Context(), []store.StepBeginParams{{Key: fresh, Input: []byte(`{}`), Now: base + 5, New: true}})
		return err
	})
	if !errors.Is(err, flowtype.ErrConflict) {
		t.Errorf("StepBeginMany of a completed step: error %v, want ErrConflict", err)
	}
	checkStep(t, s, done)
}

func testStepBegin(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	charge := store.StepKey{RunID: "r", Name: "charge", Occurrence: 0}

	if n := beginStep(t, s, charge, `{"cents":100}`, base); n != 1 {
		t.Errorf("first StepBegin = %d, want 1", n)
	}
	want := store.Step{
		RunID: "r", Name: "charge", Status: store.StepRunning, Attempts: 1, Input: []byte(`{"cents":100}`),
		Compensation: store.CompensationNone, StartedAt: base,
	}
	checkStep(t, s, want)

	// A crash during the attempt: the next begin counts a new attempt.
	if n := beginStep(t, s, charge, `{"cents":100}`, base+10); n != 2 {
		t.Errorf("StepBegin after an interrupted attempt = %d, want 2", n)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: charge, Error: "timeout", Now: base + 20})
	})
	if n := beginStep(t, s, charge, `{"cents":100}`, base+30); n != 3 {
		t.Errorf("StepBegin after a retrying failure = %d, want 3", n)
	}
	got := step(t, s, charge)
	if got.Status != store.StepRunning || got.Attempts != 3 || got.Error != "" {
		t.Errorf("step after third begin: status %s, attempts %d, error %q; want running, 3, none", got.Status, got.Attempts, got.Error)
	}

	// Another occurrence of the same name counts on its own.
	if n := beginStep(t, s, store.StepKey{RunID: "r", Name: "charge", Occurrence: 1}, `{}`, base+40); n != 1 {
		t.Errorf("StepBegin of occurrence 1 = %d, want 1", n)
	}

	completeStep(t, s, charge, `"ch_1"`, false, base+50)
	done := step(t, s, charge)
	expectErr(t, s, flowtype.ErrConflict, "StepBegin of a completed step", func(ctx context.Context, tx store.Tx) error {
		_, err := tx.StepBegin(ctx, store.StepBeginParams{Key: charge, Input: []byte(`{}`), Now: base + 60})
		return err
	})
	checkStep(t, s, done)

	// A step of a run that does not exist is refused.
	err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.StepBegin(t.Context(), store.StepBeginParams{Key: store.StepKey{RunID: "ghost", Name: "x"}, Input: []byte(`{}`), Now: base})
		return err
	})
	if err == nil {
		t.Error("StepBegin of a step of an unknown run succeeded")
	}
	if st := steps(t, s, "ghost"); len(st) != 0 {
		t.Errorf("unknown run has steps %v", st)
	}
}

func testStepComplete(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"), newRun("other"))
	a0 := store.StepKey{RunID: "r", Name: "a", Occurrence: 0}
	a1 := store.StepKey{RunID: "r", Name: "a", Occurrence: 1}
	b := store.StepKey{RunID: "r", Name: "b", Occurrence: 0}
	c := store.StepKey{RunID: "r", Name: "c", Occurrence: 0}
	x := store.StepKey{RunID: "other", Name: "x", Occurrence: 0}
	for i, k := range []store.StepKey{a0, a1, b, c, x} {
		beginStep(t, s, k, `{}`, base+int64(i))
	}
	// Completion order differs from begin order.
	order := []struct {
		key         store.StepKey
		compensable bool
	}{{b, false}, {a1, true}, {x, true}, {c, true}, {a0, false}}
	for i, o := range order {
		completeStep(t, s, o.key, fmt.Sprintf(`{"n":%d}`, i), o.compensable, base+100+int64(i))
	}
	var last int64
	for i, o := range order {
		if o.key.RunID != "r" {
			continue
		}
		st := step(t, s, o.key)
		if st.CompletedSeq <= last {
			t.Errorf("step %s completed %d-th has CompletedSeq %d, not above the previous %d", o.key, i, st.CompletedSeq, last)
		}
		last = st.CompletedSeq
		// Nothing is to be undone until the run unwinds.
		if st.Status != store.StepCompleted || st.Compensable != o.compensable || st.Compensation != store.CompensationNone ||
			string(st.Output) != fmt.Sprintf(`{"n":%d}`, i) || st.FinishedAt != base+100+int64(i) || st.Attempts != 1 {
			t.Errorf("step %s: %+v; want completed, compensable %v, compensation none, output {\"n\":%d}, finished %d, 1 attempt",
				o.key, st, o.compensable, i, base+100+int64(i))
		}
	}

	done := step(t, s, b)
	expectErr(t, s, flowtype.ErrConflict, "StepComplete of a completed step", func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: b, Output: []byte(`"again"`), Compensable: true, Now: base + 999})
	})
	checkStep(t, s, done)
	expectErr(t, s, flowtype.ErrConflict, "StepComplete of a step never begun", func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: store.StepKey{RunID: "r", Name: "nope"}, Output: []byte(`1`), Now: base})
	})
	if _, ok := steps(t, s, "r")[store.StepKey{RunID: "r", Name: "nope"}]; ok {
		t.Error("StepComplete of a step never begun created it")
	}

	// A retried step completes once its new attempt began, and its error
	// is cleared.
	d := store.StepKey{RunID: "r", Name: "d"}
	beginStep(t, s, d, `{}`, base+200)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: d, Error: "flaky", Now: base + 201})
	})
	expectErr(t, s, flowtype.ErrConflict, "StepComplete of a retrying step without a new attempt", func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: d, Output: []byte(`1`), Now: base + 202})
	})
	beginStep(t, s, d, `{}`, base+203)
	completeStep(t, s, d, `"ok"`, false, base+204)
	if st := step(t, s, d); st.Status != store.StepCompleted || st.Error != "" || st.Attempts != 2 || st.CompletedSeq <= last {
		t.Errorf("retried step after completion: %+v; want completed, no error, 2 attempts, CompletedSeq above %d", st, last)
	}
}

func testStepCompensationArm(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"), newRun("other"))
	key := func(run, name string) store.StepKey { return store.StepKey{RunID: run, Name: name} }
	undo, plain, running, retrying, failed, other :=
		key("r", "undo"), key("r", "plain"), key("r", "running"), key("r", "retrying"), key("r", "failed"), key("other", "undo")
	for _, k := range []store.StepKey{undo, plain, running, retrying, failed, other} {
		beginStep(t, s, k, `{}`, base)
	}
	completeStep(t, s, undo, `1`, true, base+1)
	completeStep(t, s, plain, `2`, false, base+2)
	completeStep(t, s, other, `3`, true, base+3)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(
			tx.StepFail(ctx, store.StepFailParams{Key: retrying, Error: "x", Now: base + 4}),
			tx.StepFail(ctx, store.StepFailParams{Key: failed, Error: "x", Final: true, Now: base + 4}),
		)
	})
	arm := func() {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationArm(ctx, "r") })
	}
	before := steps(t, s, "r")
	arm()
	for k, st := range before {
		want := st
		if k == undo {
			want.Compensation = store.CompensationPending
		}
		checkStep(t, s, want)
	}
	if st := step(t, s, other); st.Compensation != store.CompensationNone {
		t.Errorf("arming run r armed a step of another run: %s", st.Compensation)
	}

	// Arming again leaves compensations under way or done alone.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.StepCompensationBegin(ctx, undo); err != nil {
			return err
		}
		return tx.StepCompensationEnd(ctx, undo, store.CompensationCompleted, "")
	})
	done := step(t, s, undo)
	arm()
	checkStep(t, s, done)
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationArm(ctx, "ghost") })
}

func testStepFail(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	k := store.StepKey{RunID: "r", Name: "ship", Occurrence: 2}
	beginStep(t, s, k, `{"box":1}`, base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "carrier down", Final: false, Now: base + 5})
	})
	retrying := store.Step{
		RunID: "r", Name: "ship", Occurrence: 2, Status: store.StepRetrying, Attempts: 1, Input: []byte(`{"box":1}`),
		Error: "carrier down", Compensation: store.CompensationNone, StartedAt: base, FinishedAt: base + 5,
	}
	checkStep(t, s, retrying)
	expectErr(t, s, flowtype.ErrConflict, "StepFail of a step that is not running", func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "again", Final: true, Now: base + 6})
	})
	checkStep(t, s, retrying)

	if n := beginStep(t, s, k, `{"box":1}`, base+10); n != 2 {
		t.Errorf("StepBegin after a retrying failure = %d, want 2", n)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "address invalid", Final: true, Now: base + 15})
	})
	failed := step(t, s, k)
	if failed.Status != store.StepFailed || failed.Error != "address invalid" || failed.Attempts != 2 || failed.FinishedAt != base+15 {
		t.Errorf("finally failed step: %+v; want failed, its error, 2 attempts, finished %d", failed, base+15)
	}
	ops := []struct {
		name string
		fn   func(ctx context.Context, tx store.Tx) error
	}{
		{"StepBegin", func(ctx context.Context, tx store.Tx) error {
			_, err := tx.StepBegin(ctx, store.StepBeginParams{Key: k, Input: []byte(`{}`), Now: base + 20})
			return err
		}},
		{"StepComplete", func(ctx context.Context, tx store.Tx) error {
			return tx.StepComplete(ctx, store.StepCompleteParams{Key: k, Output: []byte(`1`), Now: base + 20})
		}},
		{"StepFail", func(ctx context.Context, tx store.Tx) error {
			return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "x", Now: base + 20})
		}},
	}
	for _, op := range ops {
		expectErr(t, s, flowtype.ErrConflict, op.name+" of a failed step", op.fn)
		checkStep(t, s, failed)
	}
	expectErr(t, s, flowtype.ErrConflict, "StepFail of an unknown step", func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: store.StepKey{RunID: "r", Name: "nope"}, Error: "x", Now: base})
	})
}

func testStepCompensation(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"), newRun("other"))
	s1 := store.StepKey{RunID: "r", Name: "reserve"}
	s2 := store.StepKey{RunID: "r", Name: "log"}
	s3 := store.StepKey{RunID: "r", Name: "charge"}
	x := store.StepKey{RunID: "other", Name: "charge"}
	for i, k := range []store.StepKey{s1, s2, s3, x} {
		beginStep(t, s, k, `{}`, base+int64(i))
		completeStep(t, s, k, `"out"`, k != s2, base+10+int64(i))
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.StepCompensationArm(ctx, "r"), tx.StepCompensationArm(ctx, "other"))
	})
	compBegin := func(k store.StepKey) int {
		t.Helper()
		var n int
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = tx.StepCompensationBegin(ctx, k)
			return err
		})
		return n
	}
	compEnd := func(k store.StepKey, state store.CompensationState, msg string) {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationEnd(ctx, k, state, msg) })
	}
	expectComp := func(k store.StepKey, state store.CompensationState, attempts int, msg string) {
		t.Helper()
		st := step(t, s, k)
		if st.Compensation != state || st.CompensationAttempts != attempts || st.CompensationError != msg {
			t.Errorf("step %s: compensation %s, %d attempts, error %q; want %s, %d, %q",
				k, st.Compensation, st.CompensationAttempts, st.CompensationError, state, attempts, msg)
		}
		if st.Status != store.StepCompleted || string(st.Output) != `"out"` {
			t.Errorf("compensating step %s changed its outcome: status %s, output %q", k, st.Status, st.Output)
		}
	}
	beginConflict := func(what string, k store.StepKey) {
		t.Helper()
		expectErr(t, s, flowtype.ErrConflict, what, func(ctx context.Context, tx store.Tx) error {
			_, err := tx.StepCompensationBegin(ctx, k)
			return err
		})
	}

	beginConflict("compensation begin of a step without a compensate hook", s2)
	expectComp(s2, store.CompensationNone, 0, "")
	expectErr(t, s, flowtype.ErrConflict, "compensation end before it began", func(ctx context.Context, tx store.Tx) error {
		return tx.StepCompensationEnd(ctx, s1, store.CompensationCompleted, "")
	})
	expectComp(s1, store.CompensationPending, 0, "")

	if n := compBegin(s1); n != 1 {
		t.Errorf("first compensation begin = %d, want 1", n)
	}
	expectComp(s1, store.CompensationRunning, 1, "")
	if n := compBegin(s1); n != 2 { // interrupted attempt
		t.Errorf("compensation begin after an interrupted attempt = %d, want 2", n)
	}
	compEnd(s1, store.CompensationRetrying, "refund api 503")
	expectComp(s1, store.CompensationRetrying, 2, "refund api 503")
	if n := compBegin(s1); n != 3 {
		t.Errorf("compensation begin after retrying = %d, want 3", n)
	}
	compEnd(s1, store.CompensationFailed, "refund rejected")
	expectComp(s1, store.CompensationFailed, 3, "refund rejected")
	beginConflict("compensation begin of a failed compensation", s1)
	expectComp(s1, store.CompensationFailed, 3, "refund rejected")

	compBegin(s3)
	compEnd(s3, store.CompensationCompleted, "")
	expectComp(s3, store.CompensationCompleted, 1, "")
	beginConflict("compensation begin of a completed compensation", s3)

	compBegin(x)
	compEnd(x, store.CompensationFailed, "nope")

	// Operator retry: only the failed compensations of that run.
	var n int64
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.StepCompensationRetryFailed(ctx, "r")
		return err
	})
	if n != 1 {
		t.Errorf("retry failed compensations of r = %d, want 1", n)
	}
	expectComp(s1, store.CompensationPending, 0, "")
	expectComp(s3, store.CompensationCompleted, 1, "")
	expectComp(x, store.CompensationFailed, 1, "nope")

	if n := compBegin(s1); n != 1 {
		t.Errorf("compensation begin after operator retry = %d, want 1", n)
	}
	compEnd(s1, store.CompensationFailed, "still rejected")

	// Operator skip.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.StepCompensationSkipFailed(ctx, "r")
		return err
	})
	if n != 1 {
		t.Errorf("skip failed compensations of r = %d, want 1", n)
	}
	if st := step(t, s, s1); st.Compensation != store.CompensationSkipped {
		t.Errorf("skipped compensation is %s", st.Compensation)
	}
	beginConflict("compensation begin of a skipped compensation", s1)
	expectComp(x, store.CompensationFailed, 1, "nope")
	for _, fn := range []func(ctx context.Context, tx store.Tx) (int64, error){
		func(ctx context.Context, tx store.Tx) (int64, error) { return tx.StepCompensationRetryFailed(ctx, "r") },
		func(ctx context.Context, tx store.Tx) (int64, error) { return tx.StepCompensationSkipFailed(ctx, "r") },
	} {
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = fn(ctx, tx)
			return err
		})
		if n != 0 {
			t.Errorf("retry/skip with no failed compensation left = %d, want 0", n)
		}
	}
	expectComp(s3, store.CompensationCompleted, 1, "")
}

// testStepCancel checks that StepCancel fails a running or retrying step
// and an open wait for good, with the error's shape, and refuses a call
// with an outcome or no record.
func testStepCancel(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	key := func(name string) store.StepKey { return store.StepKey{RunID: "r", Name: name} }
	running, retrying, waiting, done := key("running"), key("retrying"), key("flow.sleep"), key("done")
	for _, k := range []store.StepKey{running, retrying, done} {
		beginStep(t, s, k, `{}`, base)
	}
	completeStep(t, s, done, `1`, true, base+1)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(
			tx.StepFail(ctx, store.StepFailParams{Key: retrying, Error: "x", Now: base + 2}),
			tx.StepWait(ctx, store.StepBeginParams{Key: waiting, Input: []byte(`{"until":1}`), Position: 3, Now: base + 2}),
		)
	})
	f := store.Failure{Code: "flowlite.scope_cancelled", Permanent: true}
	for _, k := range []store.StepKey{running, retrying, waiting} {
		before := step(t, s, k)
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.StepCancel(ctx, store.StepFailParams{Key: k, Error: "scope cancelled", Failure: f, Now: base + 10})
		})
		want := before
		want.Status, want.Error, want.Failure, want.FinishedAt = store.StepFailed, "scope cancelled", f, base+10
		checkStep(t, s, want)
	}
	doneBefore := step(t, s, done)
	for _, k := range []store.StepKey{running, done, key("ghost")} {
		expectErr(t, s, flowtype.ErrConflict, "StepCancel of "+k.Name, func(ctx context.Context, tx store.Tx) error {
			return tx.StepCancel(ctx, store.StepFailParams{Key: k, Error: "again", Failure: f, Now: base + 20})
		})
	}
	checkStep(t, s, doneBefore)
}

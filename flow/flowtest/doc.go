// Package flowtest tests flowlite steps and workflows in isolation, through
// the real engine, without writing SQL.
//
// New gives each test an Env: a started flow.Engine on a fresh SQLite file in
// the test's temporary directory, driven by a manual clock, with an
// interceptor that records every step and compensation attempt and can make
// them fail on demand. The engine is stopped and closed when the test ends.
//
//	func TestPlaceOrder(t *testing.T) {
//		env := flowtest.New(t, nil)
//		env.FailStep("charge_card", -1, flow.Permanent(errDeclined))
//
//		_, run, err := flowtest.RunWorkflow(env, placeOrder, order)
//		if !errors.Is(err, flow.ErrRolledBack) {
//			t.Fatalf("err = %v, want rolled back", err)
//		}
//		if got := env.Compensated(run.ID()); !slices.Equal(got, []string{"reserve_inventory"}) {
//			t.Fatalf("compensated %v", got)
//		}
//	}
//
// # Time
//
// The engine reads time from the Env's clock, which starts at 2025-01-01
// 00:00:00 UTC, or where WithInitialTime says (New(t, cfg,
// flowtest.WithInitialTime(start))), and moves only when told: Advance moves
// it and wakes the engine, so runs that became due are picked up at once.
// Await, RunWorkflow, RunStep and AwaitSlot do this by themselves: whenever
// the engine is idle (no run in flight, none ready), they move the clock to
// the next time anything in the Env is due, for the awaited run or any
// other: a delayed start, a retry backoff, a flow.Sleep, a flow.Receive
// timeout, a run's deadline, a schedule's next slot. So every durable wait,
// including a child's that its parent awaits, passes at once and in the
// order real time would pass them: a test of a 48-hour approval timeout runs
// in milliseconds. A wait that no time ends (a Receive without timeout whose
// signal nobody sends) is left alone, and Await fails after WaitLimit with
// the run's state. Per-attempt timeouts (Step.Timeout) are real durations
// and are not affected by the clock.
//
// Await takes any Handle: a *flow.Run, or a handle that wraps one with a
// typed Result, such as *flowdef.Run (whose outputs keep their declared
// types) or the run handle flowdefgen generates for a definition:
//
//	run, err := billing.Start(ctx, env.Engine, in, nil) // a *BillingRun
//	out, err := flowtest.Await(env, run)                 // a BillingOutput
//
// # Injected failures
//
// FailStep and FailCompensation make the next attempts of a step, or of its
// compensation, fail with a given error instead of running the body. Use
// flow.Permanent(err) for a failure that is not retried. Attempts lists what
// the interceptor saw, and Compensated the steps whose compensation
// completed, in the order they ran.
//
// # One step
//
// RunStep runs a single step through the engine inside a generated one-step
// workflow named "flowtest.step/" plus the step's name, so its retry policy,
// timeout and checkpoint apply exactly as in production.
//
// An Env belongs to the test given to New: its methods report problems to
// that test with Fatalf, so call them from that test's goroutine, and create
// one Env per test (or per subtest); they are cheap.
//
// # Backend
//
// An Env runs on a SQLite file in t.TempDir() unless the environment
// variable FLOWLITE_TEST_BACKEND is "postgres" (BackendEnv): then each Env
// gets a schema of its own on the PostgreSQL database FLOWLITE_PG_DSN names
// (default postgres://postgres@127.0.0.1:5432/postgres), dropped when the
// test ends, and a server that cannot be reached fails the test. So
//
//	FLOWLITE_TEST_BACKEND=postgres go test ./...
//
// checks that a program's workflows behave the same on PostgreSQL, without
// a change to its tests.
//
// Package flowtest imports flow, its backends flow/flowsqlite and
// flow/flowpg, flow/flowhistory (ReplayFile), internal/clock and
// internal/pgtest (which reads the environment).
package flowtest

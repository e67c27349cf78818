// Package crashtest holds flowlite's crash and lease tests. It has no API:
// its tests run the engine in child processes that are killed with SIGKILL
// at random moments and restarted, then check the database against an
// external ledger the step bodies wrote (see crash_test.go; the same loop
// runs on a set of two shard files in TestCrashResumeShards), and pit two
// engines on one file against each other to check lease fencing (see
// lease_test.go), and kill a change-feed consumer mid-stream to check that
// it resumes without losing a change (feed_crash_test.go).
//
// The same workers run on a PostgreSQL schema (pgcrash_test.go, with
// FLOWLITE_PG_TEST=1), and, with FLOWLITE_PG_FAULTS=1 only, under a
// server that restarts and sessions that are terminated
// (pgfaults_test.go).
//
// Failover (failover_test.go, with FLOWLITE_PG_FAILOVER=1 only): a primary
// and a streaming standby of the test's own (pgcluster_test.go), the
// primary killed under the load of three workers and the standby
// promoted, with a synchronous standby (nothing acknowledged may be lost)
// and an asynchronous one (what is lost must explain every step that ran
// again); in both no step may run twice at once.
//
// Flow control under kills (limits_crash_test.go, issue 21): three
// workers on one SQLite file (TestLimitsWorkersKilled) or PostgreSQL schema
// (TestPGLimitsWorkersKilled) work a queue limited to 3 runs at once and 1
// per concurrency key, a queue limited to 2 at once and a queue limited to
// 20 starts per 500ms, while the parent SIGKILLs them at random; the job
// bodies' ledger must show the limits held at every instant, every run
// complete and no slot stay held. Bounded to 260 runs and 6 kills (6-10 s
// each); the long form is 1,300 runs and 40 kills (about 30 s each):
//
//	FLOWLITE_CRASH_LONG=1 go test -count=1 -run 'LimitsWorkersKilled' ./internal/crashtest
//	FLOWLITE_PG_TEST=1 FLOWLITE_CRASH_LONG=1 go test -count=1 -run 'LimitsWorkersKilled' ./internal/crashtest
//
// Run the long crash test with FLOWLITE_CRASH_LONG=1 or -args -long.
//
// Its tests import flow, flow/flowsqlite and flow/flowpg (the engines'
// backends), internal/pgtest (a fresh schema per test) and
// modernc.org/sqlite for raw checks.
package crashtest

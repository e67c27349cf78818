// Package crashtest holds flowlite's crash and lease tests. It has no API:
// its tests run the engine in child processes that are killed with SIGKILL
// at random moments and restarted, then check the database against an
// external ledger the step bodies wrote (see crash_test.go), and pit two
// engines on one file against each other to check lease fencing (see
// lease_test.go), and kill a change-feed consumer mid-stream to check that
// it resumes without losing a change (feed_crash_test.go).
//
// Run the long crash test with FLOWLITE_CRASH_LONG=1 or -args -long.
//
// Its tests import flow, flow/flowsqlite (the engines' backend) and
// modernc.org/sqlite for raw checks.
package crashtest

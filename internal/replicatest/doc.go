// Package replicatest is the machine-loss experiment of issue 26, as tests:
// an engine process enqueues runs at a steady rate and works them while
// Litestream replicates its file to a directory, either inside the engine
// (flowsqlite.Options.Replication with flowlitestream) or as a litestream process of its own
// beside it; both processes are SIGKILLed at once (the machine is lost),
// the replica is restored, and every run the engine acknowledged is looked
// up in the restored file. None acknowledged more than the sync interval
// before the loss may be missing.
//
// go test runs one short trial of each set-up (about 2s of load each).
// FLOWLITE_REPLICA_LONG=1 runs the form: 5 trials of 20s at 300
// runs a second for each set-up, and prints the table of the issue;
// FLOWLITE_REPLICA_LOAD sets each trial's load (CI: 5s).
//
// The separate-process set-up needs the litestream binary of the version
// flowlite links (v0.5.18): FLOWLITE_LITESTREAM names it, else the first
// litestream on PATH or in $GOBIN / $GOPATH/bin, else the test builds it
// into the user cache directory with go install (network needed the first
// time). Without either it skips, unless FLOWLITE_REQUIRE_LITESTREAM=1,
// which makes that a failure (CI sets it). Under the race detector the
// trials skip: its slowdown exceeds the recovery point they measure.
//
// It imports flow, flow/flowsqlite and flow/flowlitestream; tests only.
package replicatest

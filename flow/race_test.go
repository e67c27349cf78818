//go:build race

package flow_test

// raceEnabled says the race detector runs: the tests that hold the writer
// on purpose (long statements) do fewer of them, as each takes several
// times as long.
const raceEnabled = true

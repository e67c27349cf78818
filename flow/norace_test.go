//go:build !race

package flow_test

// raceEnabled says the race detector runs; see race_test.go.
const raceEnabled = false

//go:build !race

package pgstore_test

// raceEnabled says the race detector runs; see race_test.go.
const raceEnabled = false

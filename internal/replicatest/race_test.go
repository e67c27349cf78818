//go:build race

package replicatest

// raceDetector is true in a binary built with -race, whose 5-10x slowdown
// (on the engine process as well) makes the recovery point this package
// measures meaningless.
const raceDetector = true

//go:build !race

package replicatest

const raceDetector = false

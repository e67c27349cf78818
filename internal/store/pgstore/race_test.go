//go:build race

package pgstore_test

// raceEnabled says the race detector runs: TestConformancePartitioned,
// whose Go code is TestConformance's (only the server's tables differ),
// does not run the suite a second time under it.
const raceEnabled = true

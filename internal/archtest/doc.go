// Package archtest holds no code, only tests: they check the import
// boundaries the design draws between flowlite's packages (which package may
// import which), so that a change crossing one fails go test ./... and CI,
// naming the offending import, instead of being found by review.
//
// The tests run `go list`, so they need the go command on PATH, which
// go test provides.
package archtest

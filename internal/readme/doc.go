// Package readme holds the tests of the repository's README.md and
// docs/*.md. TestCodeBlocksRun assembles every ```go block into a module in
// a temporary directory: the README's tour with the types and fakes of
// examples/tour/services.go (and nothing else, so the tour compiles as a
// whole), and each guide's blocks with examples/tour's code and the
// declarations of testdata/support.go. It vets both, runs their tests and
// runs the tour's main. So a snippet that no longer compiles, or that
// hangs (a run in a queue no engine works), fails CI instead of a reader.
// TestLinks checks that every relative link of those files names a file
// that exists, and a heading that exists where it names one.
//
// It has no code of its own and imports nothing.
package readme

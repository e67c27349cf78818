// Package readme holds the test that runs the Go code of the repository's
// README.md: it assembles every ```go block, with the declarations the
// tour leaves out (its types, fake inventory and mailer, the charge step)
// from testdata/support.go, into a program in a temporary directory, then
// runs the program and its tests. So a snippet that no longer compiles, or
// that hangs (a run in a queue no engine works), fails CI instead of a
// reader.
//
// It has no code of its own and imports nothing.
package readme

// Package steps holds ready-made flow steps. It is built only on the public
// API of package flow, like any user's steps would be; it imports flow and
// the standard library.
package steps

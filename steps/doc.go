// Package steps holds ready-made flow steps (HTTP: a step that calls an
// HTTP endpoint with JSON). It is built only on the public
// API of package flow, like any user's steps would be; it imports flow and
// the standard library.
package steps

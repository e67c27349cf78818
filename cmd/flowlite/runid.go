package main

import "github.com/flowlite/flowlite/internal/engine"

// checkRunIDArg checks a run ID given on the command line with the rules a
// start checks it with (flow.MaxKeyBytes): an ID with a newline or another
// control character names no run flowlite records, and is a usage error
// that says so, with the NameError's words, rather than "not found".
func checkRunIDArg(id string) error {
	if id == "" {
		return usageErrorf("empty run ID")
	}
	if err := engine.CheckKey("run ID", id); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

package flowdef_test

import (
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A node whose step failed for good fails the run with the step's error,
// which names the step once: before, it read "step publish: step publish
// failed after 1 attempt(s): …" (issue 22).
func TestFailedNodeErrorNamesTheStepOnce(t *testing.T) {
	t.Parallel()
	w := load(t, sagaDef, testCatalog(t, &recorder{}))
	env := flowtest.New(t, nil)
	_, _, err := flowtest.RunWorkflow(env, w.Flow(), flowdef.Values{"id": "fail"})
	if err == nil {
		t.Fatal("the run did not fail")
	}
	msg := err.Error()
	if strings.Count(msg, "step publish") != 1 || !strings.Contains(msg, "step publish failed after 1 attempt(s): ") {
		t.Errorf("error %q does not name the step once", msg)
	}
}

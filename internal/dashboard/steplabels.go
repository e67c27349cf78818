package dashboard

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// A step call inside a parallel call's branch is recorded under a scoped
// name, "all0.1/price" for branch 1 of the body's first All, nested
// branches one scope per level. People know the step as "price" and the
// branch by its place in the fan-out, so the pages show "price (2 of 5)"
// and keep the recorded name in a tooltip. A call of a cancellation scope
// (flow.WithCancel) is recorded under "scope<n>/", shown as "scope n+1".

// branchScope matches one scope of a branch call's name: the parallel
// call (kind and number within its own scope) and the branch, or a
// cancellation scope and its number.
var branchScope = regexp.MustCompile(`^(?:((?:all|first)\d+)\.(\d+)|scope(\d+))/`)

// stepLabels names a run's step calls for people.
type stepLabels struct {
	// branches is how many branches each parallel call has, as far as its
	// recorded calls tell (branches that have not started yet are not
	// counted), keyed by the call's full scope ("all0", "all0.1/all0").
	branches map[string]int
}

// newStepLabels counts the branches of the parallel calls in steps.
func newStepLabels(steps []flow.StepRecord) stepLabels {
	l := stepLabels{branches: make(map[string]int)}
	for _, s := range steps {
		scope, rest := "", s.Name
		for {
			m := branchScope.FindStringSubmatch(rest)
			if m == nil {
				break
			}
			if m[1] != "" {
				call := scope + m[1]
				i, _ := strconv.Atoi(m[2])
				l.branches[call] = max(l.branches[call], i+1)
			}
			scope += m[0]
			rest = rest[len(m[0]):]
		}
	}
	return l
}

// Of returns the label of the call occ of step name: the step's own name,
// "#n" (from 1) when a branch called it more than once, and for each
// parallel call it runs in, outermost first, its branch as "i of n".
// Top-level calls keep the recorded form "name#occ", which reset and fork
// take.
func (l stepLabels) Of(name string, occ int) string {
	scope, rest := "", name
	var places []string
	for {
		m := branchScope.FindStringSubmatch(rest)
		if m == nil {
			break
		}
		if m[1] == "" {
			n, _ := strconv.Atoi(m[3])
			places = append(places, fmt.Sprintf("scope %d", n+1))
		} else {
			call := scope + m[1]
			i, _ := strconv.Atoi(m[2])
			n := max(l.branches[call], i+1)
			places = append(places, fmt.Sprintf("%d of %d", i+1, n))
		}
		scope += m[0]
		rest = rest[len(m[0]):]
	}
	if len(places) == 0 {
		return fmt.Sprintf("%s#%d", name, occ)
	}
	label := rest
	if occ > 0 {
		label += fmt.Sprintf(" #%d", occ+1)
	}
	return label + " (" + strings.Join(places, ", ") + ")"
}

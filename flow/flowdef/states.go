package flowdef

import (
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// NodeStates derives the state of each node of d from a run's step
// records (flow.RunInfo.Steps), for drawing the run's DAG: a node's steps
// are recorded under its ID, with a branch prefix for fan-out items. The
// states are completed, running, failed, compensating and compensated; a
// node that records no step (sleep, receive, call) counts as completed
// once a node after it has a state, and as waiting when the run waits and
// all its needs completed.
func NodeStates(d *Definition, run flow.RunInfo) States {
	type agg struct{ total, completed, failed, running, compensated, compensating int }
	byNode := map[string]*agg{}
	for _, s := range run.Steps {
		id := s.Name[strings.LastIndex(s.Name, "/")+1:]
		a := byNode[id]
		if a == nil {
			a = &agg{}
			byNode[id] = a
		}
		a.total++
		switch {
		case s.Compensation == "completed":
			a.compensated++
		case s.Compensation == "running" || s.Compensation == "retrying" || s.Compensation == "pending" && run.Status == flow.StatusCompensating:
			a.compensating++
		case s.Status == "failed":
			a.failed++
		case s.Status == "completed":
			a.completed++
		default:
			a.running++
		}
	}
	states := States{}
	for _, n := range d.Steps {
		a := byNode[n.ID]
		switch {
		case a == nil:
		case a.failed > 0:
			states[n.ID] = "failed"
		case a.compensating > 0:
			states[n.ID] = "compensating"
		case a.compensated > 0:
			states[n.ID] = "compensated"
		case a.running > 0:
			states[n.ID] = "running"
		default:
			states[n.ID] = "completed"
		}
	}
	// Nodes without steps: done when something after them started.
	for changed := true; changed; {
		changed = false
		for _, n := range d.Steps {
			if states[n.ID] == "" {
				continue
			}
			for _, r := range n.Needs {
				if states[r.ID] == "" {
					states[r.ID] = "completed"
					changed = true
				}
			}
		}
	}
	if run.Status == flow.StatusWaiting {
		for _, n := range d.Steps {
			if states[n.ID] != "" || n.Kind() == "step" {
				continue
			}
			ready := true
			for _, r := range n.Needs {
				ready = ready && states[r.ID] == "completed"
			}
			if ready {
				states[n.ID] = "waiting"
			}
		}
	}
	return states
}

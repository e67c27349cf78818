package flowdef

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Catalog lists what definitions may use: registered steps by name, named
// compensations, and child workflows. Compile checks a definition against
// it and the compiled workflow calls into it. Build it at start-up, before
// compiling; it is not safe to modify while compiling.
type Catalog struct {
	steps     map[string]*stepEntry
	comps     map[string]*compEntry
	workflows map[string][]*workflowEntry // by name, versions ascending
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{steps: map[string]*stepEntry{}, comps: map[string]*compEntry{}, workflows: map[string][]*workflowEntry{}}
}

// stepEntry is a registered step seen without its types: the types for
// validation, and a function that runs one call of it.
type stepEntry struct {
	name    string
	in, out reflect.Type
	// inName and outName are the Go names of in and out (OpenBatchInput),
	// for messages: a manifest's types are rebuilt without them.
	inName, outName string
	hasComp         bool
	run             func(wc flow.Context, input []byte, o overrides) ([]byte, error)
}

// overrides are what a node changes in the step it uses.
type overrides struct {
	// name is the node's ID, under which the call is recorded: the
	// history, flowtest's FailStep and the dashboard's DAG name nodes, and
	// two nodes using one step stay apart.
	name       string
	retry      *flow.RetryPolicy
	timeout    time.Duration
	compensate any // a func(context.Context, In, Out) error of the step's types
}

type compEntry struct {
	name    string
	in, out reflect.Type
	fn      any
}

type workflowEntry struct {
	name    string
	version int
	in, out reflect.Type // of the Go workflow; nil for a definition
	def     *Workflow    // set for a definition
}

// AddStep makes s usable as `uses: NAME` in definitions. A node's input is
// encoded to JSON and decoded into In (unknown fields refused), so the
// definition's expressions are checked against In's and Out's JSON fields.
func AddStep[In, Out any](c *Catalog, s flow.Step[In, Out]) error {
	if s.Name == "" {
		return fmt.Errorf("add step: a step has no Name")
	}
	if _, dup := c.steps[s.Name]; dup {
		return fmt.Errorf("add step %s: a step of that name is already in the catalog", s.Name)
	}
	c.steps[s.Name] = &stepEntry{
		name: s.Name, in: reflect.TypeFor[In](), out: reflect.TypeFor[Out](), hasComp: s.Compensate != nil,
		inName: goName(reflect.TypeFor[In]()), outName: goName(reflect.TypeFor[Out]()),
		run: func(wc flow.Context, input []byte, o overrides) ([]byte, error) {
			in, err := decodeStrict[In](input)
			if err != nil {
				return nil, flow.Permanent(fmt.Errorf("step %s: input %s does not decode into %s: %w", s.Name, input, reflect.TypeFor[In](), err))
			}
			step := s
			if o.name != "" {
				step.Name = o.name
			}
			if o.retry != nil {
				step.Retry = o.retry
			}
			if o.timeout > 0 {
				step.Timeout = o.timeout
			}
			if o.compensate != nil {
				step.Compensate = o.compensate.(func(context.Context, In, Out) error)
			}
			out, err := flow.Do(wc, step, in)
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(out)
			if err != nil {
				return nil, flow.Permanent(fmt.Errorf("step %s: encode output: %w", s.Name, err))
			}
			return b, nil
		},
	}
	return nil
}

// AddCompensation makes fn usable as `compensate: NAME` on nodes whose step
// has the same In and Out types; it replaces the step's own Compensate for
// those nodes.
func AddCompensation[In, Out any](c *Catalog, name string, fn func(ctx context.Context, in In, out Out) error) error {
	if name == "" || fn == nil {
		return fmt.Errorf("add compensation: a compensation needs a name and a function")
	}
	if _, dup := c.comps[name]; dup {
		return fmt.Errorf("add compensation %s: a compensation of that name is already in the catalog", name)
	}
	c.comps[name] = &compEntry{name: name, in: reflect.TypeFor[In](), out: reflect.TypeFor[Out](), fn: fn}
	return nil
}

// AddWorkflow makes the Go workflow wf callable as a child from
// definitions (`call: {workflow: NAME, version: N}`). The engine that runs
// the definitions must register wf too.
func AddWorkflow[In, Out any](c *Catalog, wf flow.Workflow[In, Out]) error {
	v := wf.Version
	if v == 0 {
		v = 1
	}
	return c.addWorkflow(&workflowEntry{name: wf.Name, version: v, in: reflect.TypeFor[In](), out: reflect.TypeFor[Out]()})
}

// AddDefinition makes the compiled definition w callable as a child from
// other definitions. The engine must register w too.
func (c *Catalog) AddDefinition(w *Workflow) error {
	return c.addWorkflow(&workflowEntry{name: w.def.Name, version: w.def.Version, def: w})
}

func (c *Catalog) addWorkflow(e *workflowEntry) error {
	if e.name == "" {
		return fmt.Errorf("add workflow: a workflow has no Name")
	}
	for _, x := range c.workflows[e.name] {
		if x.version == e.version {
			return fmt.Errorf("add workflow %s version %d: already in the catalog", e.name, e.version)
		}
	}
	list := append(c.workflows[e.name], e)
	slices.SortFunc(list, func(a, b *workflowEntry) int { return a.version - b.version })
	c.workflows[e.name] = list
	return nil
}

// workflow finds a child workflow; version 0 takes the newest.
func (c *Catalog) workflow(name string, version int) *workflowEntry {
	list := c.workflows[name]
	if len(list) == 0 {
		return nil
	}
	if version == 0 {
		return list[len(list)-1]
	}
	for _, e := range list {
		if e.version == version {
			return e
		}
	}
	return nil
}

// StepNames lists the steps in the catalog, sorted.
func (c *Catalog) StepNames() []string {
	names := make([]string, 0, len(c.steps))
	for n := range c.steps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

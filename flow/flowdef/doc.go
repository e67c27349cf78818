// Package flowdef runs workflows defined as data: a versioned JSON or YAML
// document naming registered steps, compiled to a DAG that executes on the
// public flow API, so that a defined workflow gets every guarantee a Go
// workflow has (checkpointed steps, sagas, durable waits, replay checks).
//
// The life of a definition:
//
//   - Parse reads a document (JSON or YAML, one schema; see schema.json)
//     and keeps the file:line:column of every element.
//   - A Catalog lists what a definition may use: steps (AddStep), named
//     compensations (AddCompensation) and child workflows (AddWorkflow,
//     or another compiled definition).
//   - Compile validates the definition against the catalog, reporting every
//     problem at once (cycles, duplicate IDs, unknown steps, variables and
//     fields, expressions that do not compile, type mismatches between a
//     step's output and the input that uses it), and returns a Workflow.
//   - Register adds the Workflow to an engine, Install stores its document
//     too (so the CLI and the dashboard see it) and registers it; Start
//     starts a run, whose Result keeps the outputs' declared types.
//
// An input with a default takes it when the run's input lacks the key
// (or holds null); a value the caller set wins, false, 0 and "" included.
//
// A node's step is recorded under the node's ID, so that the history, the
// dashboard's DAG and flowtest.FailStep name nodes as the definition does;
// a node that runs in a wave with others, and each forEach item, carry
// flow.All's branch prefix ("all3.1/ID").
//
// The format, in short (schema.json has every key):
//
//	name: pipeline            # with version: unique, persisted
//	version: 1
//	inputs:  {dataset: {type: string}, size: {type: int, default: 3}}
//	vars:    {rows: {type: int, default: 0}}      # global variables
//	steps:
//	  - id: extract                               # a node; uses a catalog step
//	    uses: extract
//	    with: {dataset: input.dataset}            # the input, field by field
//	  - id: transform
//	    uses: transform
//	    needs: [extract]                          # the DAG's edges
//	    forEach: steps.extract.output.batches     # fan-out: item, index
//	    parallelism: 4
//	    with: {batch: item}
//	  - id: load
//	    uses: load
//	    needs: [transform]
//	    let: {n: 'sum(map(steps.transform.output, .rows))'}  # step-local: local.n
//	    with: {rows: local.n}
//	    compensate: drop_table                    # else the step's own
//	    retry: {maxAttempts: 3, initialInterval: 1s}
//	    timeout: 30s
//	    set: {rows: output.rows}                  # into a global variable
//	  - {id: approval, needs: [load], receive: {signal: approve, timeout: 48h}}
//	  - id: publish
//	    uses: publish
//	    needs: [approval]
//	    if: steps.approval.output.approved        # false skips it and its dependents
//	  - {id: cool_off, needs: [publish], sleep: 1h}
//	  - {id: notify, needs: [cool_off], call: {workflow: notify, version: 2}}
//	outputs:
//	  rows: {value: vars.rows, type: int}
//
// Expressions are YAML strings: quote one that holds a comma, a colon
// followed by a space, or a brace inside a {flow: mapping}, and write a
// string literal inside quotes ('"events"').
//
// The ready order is the document order among nodes whose needs are done:
// a run executes the DAG in waves, each wave one flow.All of the ready
// nodes (a wave of one runs directly), and records outputs and variables
// in document order once the wave returns, so that every replay asks for
// the same calls. A node whose step fails for good fails the run, and the
// engine compensates what completed, in reverse completion order.
//
// Expressions are github.com/expr-lang/expr programs, type-checked against
// the Go types of the registered steps (fields are named as in their JSON
// encoding) and the declared types of inputs and variables. The builtin
// now() is disabled: a workflow body must be deterministic.
//
// The package imports flow, the expression library (expr-lang/expr), the
// YAML library (goccy/go-yaml) and golang.org/x/sync/semaphore; it never
// imports internal packages, so it uses nothing a user could not.
package flowdef

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
//   - Register adds the Workflow to an engine; Start starts a run.
//
// A node's step is recorded under the node's ID (a forEach item under
// flow.All's branch prefix, "all3.1/ID"), so that the history, the
// dashboard's DAG and flowtest.FailStep name nodes as the definition does.
//
// Expressions are github.com/expr-lang/expr programs, type-checked against
// the Go types of the registered steps (fields are named as in their JSON
// encoding) and the declared types of inputs and variables. The builtin
// now() is disabled: a workflow body must be deterministic.
//
// The package imports flow and the expression and YAML libraries; it never
// imports internal packages, so it uses nothing a user could not.
package flowdef

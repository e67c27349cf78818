package flowdef

import (
	"fmt"
	"time"
)

// Pos is a position in a definition's source.
type Pos struct {
	File   string
	Line   int
	Column int
}

func (p Pos) String() string {
	file := p.File
	if file == "" {
		file = "<definition>"
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Column)
}

// Definition is a parsed workflow definition. Its fields mirror the
// document (see schema.json); every element keeps its position so that
// validation can point at it.
type Definition struct {
	Name        string
	Version     int
	Description string
	Inputs      []Param
	Vars        []Param
	Steps       []*Node
	Outputs     []Expr
	// ConcurrencyKey, when set, is an expression over the input whose
	// string value is the concurrency key of every run started through
	// this package (Start, Library.Start, generated code) without
	// one in its StartOptions: the key a queue's per-key limits and fair
	// claims group runs by (docs/jobs.md, Flow control).
	ConcurrencyKey *Expr

	// Source is the document the definition was parsed from; stored with
	// it, and hashed to tell versions apart.
	Source []byte
	// Pos is where the document starts; NamePos and VersionPos where its
	// name and version are.
	Pos, NamePos, VersionPos Pos
}

// Param is a declared input or global variable: a name, a type (see
// TypeNames) and an optional default, already checked against the type.
type Param struct {
	Name       string
	Type       string
	Default    any
	HasDefault bool
	Pos        Pos
}

// Expr is a named expression: an entry of with, let, set or outputs.
type Expr struct {
	Name string
	Code string
	Pos  Pos
	// Type is the declared type of an output (see TypeNames), empty when
	// the output does not declare one. Compile checks the expression
	// against it, and generated code types the output's field with it.
	Type string
}

// Node is one element of steps: a call of a registered step (Uses), a
// durable sleep, a receive of a signal, or a child workflow call. Exactly
// one of Uses, Sleep, Receive and Call is set.
type Node struct {
	ID    string
	Uses  string
	Sleep time.Duration
	// HasSleep tells a zero Sleep from none.
	HasSleep bool
	Receive  *Receive
	Call     *Call

	Needs         []Ref
	If            *Expr
	Let           []Expr
	With          []Expr
	Input         *Expr
	ForEach       *Expr
	Parallel      int
	Retry         *Retry
	Timeout       time.Duration
	Compensate    string
	CompensatePos Pos
	Set           []Expr

	Pos, UsesPos Pos
}

// Kind names what a node does: "step", "sleep", "receive" or "call".
func (n *Node) Kind() string {
	switch {
	case n.HasSleep:
		return "sleep"
	case n.Receive != nil:
		return "receive"
	case n.Call != nil:
		return "call"
	default:
		return "step"
	}
}

// Ref is a reference to another node by ID.
type Ref struct {
	ID  string
	Pos Pos
}

// Receive waits for a signal; its output is the signal's payload.
type Receive struct {
	Signal  string
	Timeout time.Duration
}

// Call runs a child workflow (a Go workflow or another definition) and
// waits for its output.
type Call struct {
	Workflow string
	Version  int
}

// Retry overrides a step's retry policy; zero fields keep the step's.
type Retry struct {
	MaxAttempts     int
	InitialInterval time.Duration
	MaxInterval     time.Duration
	Coefficient     float64
	Jitter          float64
}

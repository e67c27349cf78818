package flowdef

import (
	"cmp"
	"errors"
	"slices"
	"strings"
)

// ErrInvalid matches every error Parse and Compile return for a
// definition that is wrong (as opposed to one that could not be read).
var ErrInvalid = errors.New("invalid workflow definition")

// Problem is one thing wrong with a definition, at a position.
type Problem struct {
	Pos Pos
	Msg string
}

func (p Problem) String() string { return p.Pos.String() + ": " + p.Msg }

// Errors lists every problem found in a definition, in source order. It
// matches ErrInvalid.
type Errors []Problem

func (e Errors) Error() string {
	var b strings.Builder
	for i, p := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

func (e Errors) Is(target error) bool { return target == ErrInvalid }

// problems collects Problems while a definition is read or checked.
type problems struct{ list Errors }

func (ps *problems) add(pos Pos, format string, args ...any) {
	ps.list = append(ps.list, Problem{Pos: pos, Msg: sprintf(format, args...)})
}

// err returns the problems sorted by position, or nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	out := slices.Clone(ps.list)
	slices.SortStableFunc(out, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Pos.File, b.Pos.File), cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Column, b.Pos.Column))
	})
	out = slices.CompactFunc(out, func(a, b Problem) bool { return a == b })
	return out
}

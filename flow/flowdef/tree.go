package flowdef

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// value is a document node with its position: the parsed YAML (or JSON,
// which YAML reads too) reduced to what a definition is made of.
type value struct {
	pos    Pos
	kind   valueKind
	scalar any // string, int64, uint64, float64, bool or nil
	text   string
	list   []*value
	fields []field
}

type field struct {
	key    string
	keyPos Pos
	val    *value
}

type valueKind int

const (
	kindScalar valueKind = iota
	kindList
	kindMap
)

func (v *value) kindName() string {
	switch v.kind {
	case kindList:
		return "a list"
	case kindMap:
		return "a mapping"
	}
	switch v.scalar.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// plain returns v as plain Go data (map[string]any, []any, scalars), for
// defaults.
func (v *value) plain() any {
	switch v.kind {
	case kindList:
		out := make([]any, len(v.list))
		for i, e := range v.list {
			out[i] = e.plain()
		}
		return out
	case kindMap:
		out := make(map[string]any, len(v.fields))
		for _, f := range v.fields {
			out[f.key] = f.val.plain()
		}
		return out
	}
	return v.scalar
}

// readTree parses src into a value tree. Syntax errors carry their
// position; features a definition has no use for (aliases, merge keys,
// several documents) are refused so that what is validated is what runs.
func readTree(file string, src []byte, ps *problems) (root *value) {
	defer func() {
		// The YAML library is not ours: a panic on odd input becomes an
		// error at the start of the document.
		if r := recover(); r != nil {
			ps.add(Pos{File: file, Line: 1, Column: 1}, "cannot parse: %v", r)
			root = nil
		}
	}()
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		pos := Pos{File: file, Line: 1, Column: 1}
		msg := err.Error()
		var se interface {
			GetToken() *token.Token
			GetMessage() string
		}
		if errors.As(err, &se) && se.GetToken() != nil {
			pos = position(file, se.GetToken())
			msg = se.GetMessage()
		}
		ps.add(pos, "syntax: %s", msg)
		return nil
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch len(docs) {
	case 0:
		ps.add(Pos{File: file, Line: 1, Column: 1}, "empty document")
		return nil
	case 1:
	default:
		ps.add(position(file, docs[1].Body.GetToken()), "a definition is one document, this is the second")
		return nil
	}
	t := treeReader{file: file, ps: ps}
	return t.node(docs[0].Body, 0)
}

type treeReader struct {
	file string
	ps   *problems
}

const maxDepth = 64

func position(file string, tk *token.Token) Pos {
	if tk == nil || tk.Position == nil {
		return Pos{File: file, Line: 1, Column: 1}
	}
	return Pos{File: file, Line: tk.Position.Line, Column: tk.Position.Column}
}

func (t *treeReader) node(n ast.Node, depth int) *value {
	if n == nil {
		return &value{pos: Pos{File: t.file, Line: 1, Column: 1}}
	}
	pos := position(t.file, n.GetToken())
	if depth > maxDepth {
		t.ps.add(pos, "nested more than %d levels deep", maxDepth)
		return nil
	}
	switch n := n.(type) {
	case *ast.NullNode:
		return &value{pos: pos, text: "null"}
	case *ast.BoolNode:
		return &value{pos: pos, scalar: n.Value, text: strconv.FormatBool(n.Value)}
	case *ast.IntegerNode:
		v := &value{pos: pos, text: n.GetToken().Value}
		switch x := n.Value.(type) {
		case int64:
			v.scalar = x
		case uint64:
			v.scalar = x
		default:
			v.scalar = fmt.Sprint(x)
		}
		return v
	case *ast.FloatNode:
		return &value{pos: pos, scalar: n.Value, text: n.GetToken().Value}
	case *ast.StringNode:
		return &value{pos: pos, scalar: n.Value, text: n.Value}
	case *ast.LiteralNode:
		s := n.Value.Value
		return &value{pos: pos, scalar: s, text: s}
	case *ast.InfinityNode, *ast.NanNode:
		t.ps.add(pos, "infinity and NaN are not values a definition can hold")
		return nil
	case *ast.TagNode:
		return t.node(n.Value, depth+1)
	case *ast.AnchorNode:
		return t.node(n.Value, depth+1)
	case *ast.AliasNode:
		t.ps.add(pos, "aliases are not supported: write the value out")
		return nil
	case *ast.SequenceNode:
		v := &value{pos: pos, kind: kindList}
		for _, e := range n.Values {
			if c := t.node(e, depth+1); c != nil {
				v.list = append(v.list, c)
			}
		}
		return v
	case *ast.MappingNode:
		v := &value{pos: pos, kind: kindMap}
		for _, mv := range n.Values {
			t.pair(v, mv, depth)
		}
		return v
	case *ast.MappingValueNode:
		v := &value{pos: position(t.file, n.Key.GetToken()), kind: kindMap}
		t.pair(v, n, depth)
		return v
	default:
		t.ps.add(pos, "unsupported YAML node %s", n.Type())
		return nil
	}
}

func (t *treeReader) pair(m *value, mv *ast.MappingValueNode, depth int) {
	keyPos := position(t.file, mv.Key.GetToken())
	if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
		t.ps.add(keyPos, "merge keys are not supported: write the fields out")
		return
	}
	k := t.node(mv.Key, depth+1)
	if k == nil {
		return
	}
	key, ok := k.scalar.(string)
	if k.kind != kindScalar || !ok {
		if k.kind != kindScalar || k.scalar == nil {
			t.ps.add(keyPos, "a key must be a string, not %s", k.kindName())
			return
		}
		key = k.text
	}
	for _, f := range m.fields {
		if f.key == key {
			t.ps.add(keyPos, "duplicate key %q (first at %s)", key, f.keyPos)
			return
		}
	}
	val := t.node(mv.Value, depth+1)
	if val == nil {
		return
	}
	m.fields = append(m.fields, field{key: key, keyPos: keyPos, val: val})
}

package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Definition is a stored workflow definition (flow/flowdef). Body is the
// document as applied; Hash its SHA-256 in hex, which tells two documents
// of one (name, version) apart. InUse is filled by DefinitionList only.
type Definition struct {
	Name      string
	Version   int
	Hash      string
	Body      []byte
	File      string
	CreatedAt int64
	UpdatedAt int64
	InUse     bool
}

// DefinitionReader reads stored definitions.
type DefinitionReader interface {
	// DefinitionGet returns one version, or flowtype.ErrDefinitionNotFound.
	DefinitionGet(ctx context.Context, name string, version int) (Definition, error)
	// DefinitionLatest returns the highest version of name, or
	// flowtype.ErrDefinitionNotFound.
	DefinitionLatest(ctx context.Context, name string) (Definition, error)
	// DefinitionList returns every version without its Body, by name and
	// version, with InUse.
	DefinitionList(ctx context.Context) ([]Definition, error)
}

// DefinitionTx stores definitions inside a write transaction.
type DefinitionTx interface {
	// DefinitionPut stores d (Name, Version, Hash, Body, File). A new (name,
	// version) is created; the same Hash again changes nothing; a different
	// Hash replaces the row while the version is not in use and returns
	// flowtype.ErrDefinitionFrozen, changing nothing, once it is. Two
	// concurrent puts of one version are decided one after the other (the
	// primary key, and a row lock where the database has no global write
	// lock).
	DefinitionPut(ctx context.Context, d Definition, now int64) (flowtype.PutResult, error)
}

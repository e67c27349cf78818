package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// ErrDefinitionFrozen is returned by PutDefinition for a document that
// differs from the stored one of its (name, version) while that version is
// in use (a run of it exists, or an engine registered it): publish the
// change as a new version, so that runs stay on the one they started with.
var ErrDefinitionFrozen = flowtype.ErrDefinitionFrozen

// ErrDefinitionNotFound is returned by GetDefinition for a name or version
// the database does not hold.
var ErrDefinitionNotFound = flowtype.ErrDefinitionNotFound

// StoredDefinition is a workflow definition as the database keeps it (see
// flow/flowdef, which parses and compiles Body): unique by (Name,
// Version), with the SHA-256 of Body in hex as Hash. InUse is filled by
// ListDefinitions.
type StoredDefinition struct {
	Name      string
	Version   int
	Hash      string
	Body      []byte
	File      string // where it was applied from, for positions in messages
	CreatedAt time.Time
	UpdatedAt time.Time
	InUse     bool
}

// PutResult says what PutDefinition did: "created", "unchanged" (the same
// Hash was stored already) or "replaced" (a version nothing used yet). See
// [flowtype.PutResult] for its values.
type PutResult = flowtype.PutResult

// PutDefinition stores d. It does not parse Body: validate it first (the
// flowlite CLI's `def apply` and flowdef.Apply do), since a definition that
// does not compile must never reach the database.
func (e *Engine) PutDefinition(ctx context.Context, d StoredDefinition) (PutResult, error) {
	if err := checkDefinitionKey(d.Name, d.Version); err != nil {
		return "", err
	}
	if d.Hash == "" || len(d.Body) == 0 {
		return "", fmt.Errorf("put definition %s version %d: a hash and a body are required", d.Name, d.Version)
	}
	now := e.core.Config().Clock.Now().UnixMilli()
	// A sharded engine stores every definition in every shard, shard 0
	// first (reads use shard 0), so that any shard's runs find it.
	// Putting the same definition again is idempotent: after an error,
	// put it again.
	var res PutResult
	for i, inner := range e.route.all() {
		var r PutResult
		err := inner.store.Write(ctx, func(tx store.Tx) error {
			var err error
			r, err = tx.DefinitionPut(ctx, store.Definition{Name: d.Name, Version: d.Version, Hash: d.Hash, Body: d.Body, File: d.File}, now)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("put definition%s: %w", e.route.where(i), err)
		}
		if i == 0 {
			res = r
		}
	}
	return res, nil
}

func checkDefinitionKey(name string, version int) error {
	if err := engine.CheckName("workflow", name); err != nil {
		return fmt.Errorf("definition: %w", err)
	}
	if version < 0 {
		return fmt.Errorf("definition %s: version %d is negative", name, version)
	}
	return nil
}

// GetDefinition returns version of the definition name, or its highest
// version when version is 0; ErrDefinitionNotFound when there is none.
func (e *Engine) GetDefinition(ctx context.Context, name string, version int) (StoredDefinition, error) {
	if err := checkDefinitionKey(name, version); err != nil {
		return StoredDefinition{}, err
	}
	var d store.Definition
	var err error
	if version == 0 {
		d, err = e.store.Reader().DefinitionLatest(ctx, name)
	} else {
		d, err = e.store.Reader().DefinitionGet(ctx, name, version)
	}
	if err != nil {
		return StoredDefinition{}, err
	}
	return storedDefinition(d), nil
}

// ListDefinitions returns every stored version, by name and version,
// without their bodies.
func (e *Engine) ListDefinitions(ctx context.Context) ([]StoredDefinition, error) {
	list, err := e.store.Reader().DefinitionList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]StoredDefinition, len(list))
	for i, d := range list {
		out[i] = storedDefinition(d)
	}
	return out, nil
}

func storedDefinition(d store.Definition) StoredDefinition {
	return StoredDefinition{
		Name: d.Name, Version: d.Version, Hash: d.Hash, Body: d.Body, File: d.File,
		CreatedAt: time.UnixMilli(d.CreatedAt).UTC(), UpdatedAt: time.UnixMilli(d.UpdatedAt).UTC(), InUse: d.InUse,
	}
}

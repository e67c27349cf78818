package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func definitionFrom(row sqlitedb.Definition) store.Definition {
	return store.Definition{
		Name: row.Name, Version: int(row.Version), Hash: row.Hash, Body: row.Body, File: row.File,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
}

func (r reader) DefinitionGet(ctx context.Context, name string, version int) (store.Definition, error) {
	row, err := r.q.DefinitionGet(ctx, sqlitedb.DefinitionGetParams{Name: name, Version: int64(version)})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Definition{}, fmt.Errorf("definition %s version %d: %w", name, version, flowtype.ErrDefinitionNotFound)
	}
	if err != nil {
		return store.Definition{}, fmt.Errorf("get definition %s version %d: %w", name, version, interpretError(err))
	}
	return definitionFrom(row), nil
}

func (r reader) DefinitionLatest(ctx context.Context, name string) (store.Definition, error) {
	row, err := r.q.DefinitionLatest(ctx, name)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Definition{}, fmt.Errorf("definition %s: %w", name, flowtype.ErrDefinitionNotFound)
	}
	if err != nil {
		return store.Definition{}, fmt.Errorf("get latest definition %s: %w", name, interpretError(err))
	}
	return definitionFrom(row), nil
}

func (r reader) DefinitionList(ctx context.Context) ([]store.Definition, error) {
	rows, err := r.q.DefinitionList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list definitions: %w", interpretError(err))
	}
	out := make([]store.Definition, len(rows))
	for i, row := range rows {
		out[i] = store.Definition{
			Name: row.Name, Version: int(row.Version), Hash: row.Hash, File: row.File,
			CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, InUse: row.InUse != 0,
		}
	}
	return out, nil
}

func (t *tx) DefinitionPut(ctx context.Context, d store.Definition, now int64) (flowtype.PutResult, error) {
	key := sqlitedb.DefinitionGetForUpdateParams{Name: d.Name, Version: int64(d.Version)}
	n, err := t.q.DefinitionInsert(ctx, sqlitedb.DefinitionInsertParams{
		Name: d.Name, Version: int64(d.Version), Hash: d.Hash, Body: d.Body, File: d.File, Now: now,
	})
	if err != nil {
		return "", fmt.Errorf("insert definition %s version %d: %w", d.Name, d.Version, interpretError(err))
	}
	if n == 1 {
		return flowtype.PutCreated, nil
	}
	cur, err := t.q.DefinitionGetForUpdate(ctx, key)
	if err != nil {
		return "", fmt.Errorf("read definition %s version %d: %w", d.Name, d.Version, interpretError(err))
	}
	if cur.Hash == d.Hash {
		return flowtype.PutUnchanged, nil
	}
	inUse, err := t.q.DefinitionInUse(ctx, sqlitedb.DefinitionInUseParams{Name: d.Name, Version: int64(d.Version)})
	if err != nil {
		return "", fmt.Errorf("check use of definition %s version %d: %w", d.Name, d.Version, interpretError(err))
	}
	if inUse != 0 {
		return "", fmt.Errorf("definition %s version %d: %w", d.Name, d.Version, flowtype.ErrDefinitionFrozen)
	}
	if _, err := t.q.DefinitionReplace(ctx, sqlitedb.DefinitionReplaceParams{
		Hash: d.Hash, Body: d.Body, File: d.File, Now: now, Name: d.Name, Version: int64(d.Version),
	}); err != nil {
		return "", fmt.Errorf("replace definition %s version %d: %w", d.Name, d.Version, interpretError(err))
	}
	return flowtype.PutReplaced, nil
}

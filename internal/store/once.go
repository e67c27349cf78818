package store

import "context"

// onceKey marks the context of a Write whose fn must run at most once.
type onceKey struct{}

// OnlyOnce marks ctx, for Write, as the context of a unit of work whose fn
// must not be called twice: it runs code with effects outside the
// transaction (a RunTx step's body), which a rollback does not undo. An
// adapter that calls fn again after the database lost the transaction
// (see the package doc: the SQLite adapter's group commit) reports the
// loss to such a caller instead.
func OnlyOnce(ctx context.Context) context.Context {
	return context.WithValue(ctx, onceKey{}, true)
}

// IsOnlyOnce reports whether ctx was marked by OnlyOnce.
func IsOnlyOnce(ctx context.Context) bool {
	once, _ := ctx.Value(onceKey{}).(bool)
	return once
}

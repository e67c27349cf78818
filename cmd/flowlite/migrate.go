package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"

	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// migrateJSON is the --json output of migrate status and migrate up.
type migrateJSON struct {
	Current int64  `json:"current"`          // version applied (after up: now)
	Latest  int64  `json:"latest"`           // highest version this binary knows
	Pending bool   `json:"pending"`          // migrations remain
	From    *int64 `json:"from,omitempty"`   // up: the version before
	Message string `json:"message,omitzero"` // up: what happened
}

func (a *app) migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Show or apply schema migrations",
		Long: `Show (status) or apply (up) the schema migrations of a flowlite database.

Every other command refuses a database whose schema is older than this
binary's, because upgrading it is a decision: engines of an older flowlite
must not work it afterwards. Back the file up first (flowlite backup DST).
Neither subcommand touches a SQLite file that is not a flowlite database.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("missing subcommand: status or up")
		}),
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show the schema version; changes nothing",
		Args:  cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if err := a.oneFile("migrate", "it upgrades one file's schema"); err != nil {
				return err
			}
			path, err := a.dbPathOrUsage()
			if err != nil {
				return err
			}
			if isPostgresURL(path) {
				return a.migrateStatusPostgres(cmd.Context(), path)
			}
			info, err := a.inspectSchema(cmd.Context(), path)
			if err != nil {
				return a.dbError(err)
			}
			if !info.Flowlite {
				return notFlowliteError(path, info)
			}
			st := info.Status
			if a.json {
				return writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.Pending()})
			}
			t := newTable(a.stdout, "Database", cell(path, 0))
			t.row("Version", fmt.Sprint(st.Current))
			t.row("Latest", fmt.Sprint(st.Latest))
			switch {
			case st.Current > st.Latest:
				t.row("State", "newer than this flowlite: upgrade flowlite")
			case st.Pending():
				t.row("State", fmt.Sprintf("%d migration(s) pending: run 'flowlite migrate up'", st.Behind))
			default:
				t.row("State", "up to date")
			}
			return t.flush()
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Apply the pending migrations",
		Args:  cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := a.oneFile("migrate", "it upgrades one file's schema"); err != nil {
				return err
			}
			path, err := a.dbPathOrUsage()
			if err != nil {
				return err
			}
			if isPostgresURL(path) {
				return a.migrateUpPostgres(ctx, path)
			}
			info, err := a.inspectSchema(ctx, path)
			if err != nil {
				return a.dbError(err)
			}
			if !info.Flowlite {
				return notFlowliteError(path, info)
			}
			from := info.Status.Current
			st, err := sqlitestore.Migrate(ctx, path, a.busyTimeout)
			if err != nil {
				return a.dbError(err)
			}
			msg := fmt.Sprintf("schema is up to date at version %d", st.Current)
			if st.Current != from {
				msg = fmt.Sprintf("migrated schema from version %d to %d", from, st.Current)
				a.logger.Info("migrated", "db", path, "from", from, "to", st.Current)
			}
			if a.json {
				return writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.Pending(), From: &from, Message: msg})
			}
			_, err = fmt.Fprintln(a.stdout, msg)
			return err
		}),
	})
	return cmd
}

// migrateStatusPostgres is migrate status on a PostgreSQL schema.
func (a *app) migrateStatusPostgres(ctx context.Context, dsn string) error {
	schema, err := a.pgSchemaName()
	if err != nil {
		return err
	}
	st, err := a.requirePostgresFlowlite(ctx, dsn, schema, false)
	if err != nil {
		return err
	}
	if a.json {
		return writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.Current < st.Latest})
	}
	t := newTable(a.stdout, "Database", cell(redactURL(dsn), 0))
	t.row("Schema", schema)
	t.row("Version", fmt.Sprint(st.Current))
	t.row("Latest", fmt.Sprint(st.Latest))
	if st.Current < st.Latest {
		t.row("State", fmt.Sprintf("%d migration(s) pending: run 'flowlite migrate up'", st.Latest-st.Current))
	} else {
		t.row("State", "up to date")
	}
	return t.flush()
}

// migrateUpPostgres is migrate up on a PostgreSQL schema: flowpg.Open
// applies the pending migrations, under the schema's advisory lock.
func (a *app) migrateUpPostgres(ctx context.Context, dsn string) error {
	schema, err := a.pgSchemaName()
	if err != nil {
		return err
	}
	before, err := a.requirePostgresFlowlite(ctx, dsn, schema, false)
	if err != nil {
		return err
	}
	if err := a.openPostgres(ctx, dsn, schema, func(*flow.Engine) error { return nil }); err != nil {
		return err
	}
	st, err := a.inspectPostgres(ctx, dsn, schema)
	if err != nil {
		return err
	}
	from := before.Current
	msg := fmt.Sprintf("schema %s is up to date at version %d", schema, st.Current)
	if st.Current != from {
		msg = fmt.Sprintf("migrated schema %s from version %d to %d", schema, from, st.Current)
		a.logger.Info("migrated", "db", redactURL(dsn), "schema", schema, "from", from, "to", st.Current)
	}
	if a.json {
		return writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.Current < st.Latest, From: &from, Message: msg})
	}
	_, err = fmt.Fprintln(a.stdout, msg)
	return err
}

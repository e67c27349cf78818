package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/internal/store/pgstore"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
	"github.com/flowlite/flowlite/internal/store/storecopy"
)

// copyJSON is the --json output of copy: the rows copied per table.
type copyJSON struct {
	Target string           `json:"target"`
	Schema string           `json:"schema"`
	Rows   map[string]int64 `json:"rows"`
}

func (a *app) copyCommand() *cobra.Command {
	var to, schema string
	cmd := &cobra.Command{
		Use:   "copy --to postgres://HOST/DB [--schema NAME]",
		Short: "Copy the database into PostgreSQL",
		Long: `Copy the SQLite database (--db) into a PostgreSQL schema (--to, --schema,
default ` + pgstore.DefaultSchema + `), to move an application to PostgreSQL without
losing its runs: runs in every state with their steps, history and signals,
dead letters and their requeue links, schedules, unique holds, queues (and
whether they are paused), registered workflows and workflow definitions.

Stop every engine working the SQLite file first: copy refuses a file on
which an engine reports itself alive, and what an engine would do during the
copy would not be copied. Runs that were running lose their lease and are
claimed afresh by the engines on PostgreSQL.

The schema is created and migrated when missing, and must hold no rows:
copy refuses a schema that already holds runs. The copy is one transaction
on PostgreSQL, checked (the row count of every table) before it commits:
the target holds everything or nothing.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageErrorf("no target: pass --to postgres://HOST/DB")
			}
			if !isPostgresURL(to) {
				return usageErrorf("--to must be a postgres:// URL")
			}
			if isPostgresURL(a.dbName()) {
				// The source is a SQLite file; say so without echoing the
				// URL's password in a "no such file" error.
				return a.notOnPostgres("copy", "it copies a SQLite file (--db) into PostgreSQL (--to)")
			}
			if err := a.oneFile("copy", "PostgreSQL needs no shards: copy one SQLite file"); err != nil {
				return err
			}
			path, err := a.dbPathOrUsage()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := a.requireCurrentSchema(ctx, path); err != nil {
				return err
			}
			src, err := sqlitestore.OpenReadOnly(ctx, path, sqlitestore.Options{BusyTimeout: a.busyTimeout})
			if err != nil {
				return a.dbError(err)
			}
			defer func() { _ = src.Close() }()
			dst, err := pgstore.Open(ctx, to, pgstore.Options{Schema: schema, NoWakes: true})
			if err != nil {
				return err
			}
			defer func() { _ = dst.Close() }()
			counts, err := storecopy.Copy(ctx, src, dst, storecopy.Options{})
			if err != nil {
				return a.dbError(err)
			}
			if a.json {
				out := copyJSON{Target: redactURL(to), Schema: dst.Schema(), Rows: map[string]int64{}}
				for _, t := range counts.Tables() {
					out.Rows[t.Table] = t.Rows
				}
				return writeJSON(a.stdout, out)
			}
			tw := newTable(a.stdout, "TABLE", "ROWS")
			for _, t := range counts.Tables() {
				tw.row(t.Table, fmt.Sprint(t.Rows))
			}
			if err := tw.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "copied %s into schema %s of %s; the counts match\n", path, dst.Schema(), redactURL(to))
			return err
		}),
	}
	cmd.Flags().StringVar(&to, "to", "", "PostgreSQL URL of the target database (postgres://…)")
	cmd.Flags().StringVar(&schema, "schema", pgstore.DefaultSchema, "PostgreSQL schema to copy into")
	return cmd
}

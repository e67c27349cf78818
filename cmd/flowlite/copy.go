package main

import (
	"fmt"

	"github.com/spf13/cobra"
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
default ` + defaultSchema + `), to move an application to PostgreSQL without
losing its runs: runs in every state with their steps, history, signals,
execution numbers and streams (each message at its position, each stream's
length and whether it is closed), dead letters and their requeue links,
schedules, unique holds, debounce keys, queues (and whether they are
paused), registered workflows and workflow definitions.

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
			// The source is a SQLite file: refuse a URL first, without
			// echoing its password in a "no such file" error, then a
			// list of files.
			db, dbErr := a.database()
			if dbErr == nil {
				if err := db.fileOnly("copy", "it copies a SQLite file (--db) into PostgreSQL (--to)"); err != nil {
					return err
				}
			}
			if err := a.oneFile("copy", "PostgreSQL needs no shards: copy one SQLite file"); err != nil {
				return err
			}
			if dbErr != nil {
				return dbErr
			}
			ctx := cmd.Context()
			if err := db.requireCurrent(ctx); err != nil {
				return err
			}
			tables, schema, err := db.copyTo(ctx, to, schema)
			if err != nil {
				return err
			}
			if a.json {
				out := copyJSON{Target: redactURL(to), Schema: schema, Rows: map[string]int64{}}
				for _, t := range tables {
					out.Rows[t.Table] = t.Rows
				}
				return writeJSON(a.stdout, out)
			}
			tw := newTable(a.stdout, "TABLE", "ROWS")
			for _, t := range tables {
				tw.row(t.Table, fmt.Sprint(t.Rows))
			}
			if err := tw.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "copied %s into schema %s of %s; the counts match\n", db.label(), schema, redactURL(to))
			return err
		}),
	}
	cmd.Flags().StringVar(&to, "to", "", "PostgreSQL URL of the target database (postgres://…)")
	cmd.Flags().StringVar(&schema, "schema", defaultSchema, "PostgreSQL schema to copy into")
	return cmd
}

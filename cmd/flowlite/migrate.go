package main

import (
	"fmt"

	"github.com/spf13/cobra"
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
			db, err := a.database()
			if err != nil {
				return err
			}
			st, err := db.version(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.pending()})
			}
			t := newTable(a.stdout, "Database", cell(db.label(), 0))
			if st.Schema != "" {
				t.row("Schema", st.Schema)
			}
			t.row("Version", fmt.Sprint(st.Current))
			t.row("Latest", fmt.Sprint(st.Latest))
			switch {
			case st.Current > st.Latest:
				t.row("State", "newer than this flowlite: upgrade flowlite")
			case st.pending():
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
			db, err := a.database()
			if err != nil {
				return err
			}
			before, err := db.version(ctx)
			if err != nil {
				return err
			}
			st, err := db.migrate(ctx)
			if err != nil {
				return err
			}
			from := before.Current
			subject, attrs := "schema", []any{"db", db.label()}
			if st.Schema != "" {
				subject += " " + st.Schema
				attrs = append(attrs, "schema", st.Schema)
			}
			msg := fmt.Sprintf("%s is up to date at version %d", subject, st.Current)
			if st.Current != from {
				msg = fmt.Sprintf("migrated %s from version %d to %d", subject, from, st.Current)
				a.logger.Info("migrated", append(attrs, "from", from, "to", st.Current)...)
			}
			if a.json {
				return writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.pending(), From: &from, Message: msg})
			}
			_, err = fmt.Fprintln(a.stdout, msg)
			return err
		}),
	})
	return cmd
}

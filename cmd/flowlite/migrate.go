package main

import (
	"fmt"

	"github.com/flowlite/flowlite/flow"

	"github.com/spf13/cobra"
)

// migrateJSON is the --json output of migrate status and migrate up.
type migrateJSON struct {
	Current int64 `json:"current"` // version applied (after up: now)
	Latest  int64 `json:"latest"`  // highest version this binary knows
	Pending bool  `json:"pending"` // migrations remain
	// TooNew: a newer flowlite migrated the schema; this binary cannot
	// work it (status then exits with code 1, after this output).
	TooNew  bool   `json:"too_new"`
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
		Long: `Show the schema version of the database, the latest this flowlite knows,
and its state: up to date, migrations pending (run 'flowlite migrate up'),
or newer than this flowlite.

A schema that a newer flowlite migrated is reported like the others, and
then status exits with code 1 and says so on stderr: this binary cannot
work that database (every other command refuses it), and a deploy script
checking 'flowlite migrate status' must stop. Pending migrations exit 0:
this binary can apply them.`,
		Args: cobra.NoArgs,
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
				if err := writeJSON(a.stdout, migrateJSON{Current: st.Current, Latest: st.Latest, Pending: st.pending(), TooNew: st.tooNew()}); err != nil {
					return err
				}
				return st.tooNewError(db.label())
			}
			t := newTable(a.stdout, "Database", cell(db.label(), 0))
			if st.Schema != "" {
				t.row("Schema", st.Schema)
			}
			t.row("Version", fmt.Sprint(st.Current))
			t.row("Latest", fmt.Sprint(st.Latest))
			switch {
			case st.tooNew():
				t.row("State", "newer than this flowlite: upgrade flowlite")
			case st.pending():
				t.row("State", fmt.Sprintf("%d migration(s) pending: run 'flowlite migrate up'", st.Behind))
			default:
				t.row("State", "up to date")
			}
			if err := t.flush(); err != nil {
				return err
			}
			return st.tooNewError(db.label())
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

// tooNew says a newer flowlite migrated the schema.
func (v schemaVersion) tooNew() bool { return v.Current > v.Latest }

// tooNewError is migrate status's exit: nil, or an error matching
// flow.ErrSchemaTooNew when this binary cannot work the database, so that
// scripts see it in the exit code on both backends.
func (v schemaVersion) tooNewError(label string) error {
	if !v.tooNew() {
		return nil
	}
	subject := "database"
	if v.Schema != "" {
		subject = "schema " + v.Schema
	}
	return fmt.Errorf("migrate status of %s: %w: %s is at version %d, this flowlite knows up to %d; upgrade flowlite",
		label, flow.ErrSchemaTooNew, subject, v.Current, v.Latest)
}

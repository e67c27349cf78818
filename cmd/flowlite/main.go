// Command flowlite inspects and operates a flowlite database: a SQLite file,
// or a schema of a PostgreSQL database.
//
//	flowlite --db app.db runs --status suspended
//	flowlite --db app.db show RUN
//	flowlite --db app.db history RUN [--export [-o FILE]]
//	flowlite --db app.db progress RUN [--follow]
//	flowlite --db app.db changes [--follow] [--json] [--consumer NAME]
//	flowlite --db app.db stream RUN NAME [--from N] [--follow] [--json]
//	flowlite --db app.db stats; health
//	flowlite --db app.db cancel|resume|skip|retry|revive RUN
//	flowlite --db app.db run-now|delete RUN; run-at RUN WHEN
//	flowlite --db app.db reset|fork RUN STEP
//	flowlite --db app.db signal RUN NAME '{"ok":true}'
//	flowlite --db app.db dead list|requeue|purge
//	flowlite --db app.db queues; flowlite --db app.db queues pause|resume QUEUE
//	flowlite --db app.db def validate|apply|list|show|graph
//	flowlite --db app.db migrate status|up
//	flowlite --db app.db clean
//	flowlite --db app.db backup DST; check; checkpoint
//	flowlite --db app.db copy --to postgres://HOST/DB
//	flowlite restore --replica DIR [--at TIME] DST
//	flowlite --db app.db serve --addr localhost:8080 [--read-only]
//
// The database is named by --db or the FLOWLITE_DB environment variable and
// must exist and be a flowlite database at this binary's schema version
// (migrate up upgrades an older one): the CLI never creates a database and
// never writes flowlite's schema into another program's. It never starts an
// engine either: it reads runs and records operator actions, which the
// engines working the database pick up on their own. serve does the same
// behind an HTML dashboard. Every read command prints a table, or JSON with
// --json. Logs go to stderr through log/slog (--log-level).
//
// --db postgres://… (or postgresql://…) names a PostgreSQL database
// instead: every command that reads runs or records operator actions, migrate
// and serve open its engine through flow/flowpg, on the schema --schema
// names (default flowlite). The SQLite file operations (backup, check,
// checkpoint) refuse it with exit code 1; health leaves out the file section.
//
// Exit codes: 0 success, 1 operational error (unknown run, a run in the
// wrong state, a file that is not a database…), 2 usage error (bad flags or
// arguments). Errors go to stderr as "flowlite: <message>".
//
// Commands that only read (runs, show, history, stats, check, health,
// queues, dead list, migrate status, serve --read-only) open the database
// with flowsqlite.OpenReadOnly: they work on a read-only file, directory or mount
// and leave no -wal or -shm file behind; commands that write refuse such a
// database with "database is read-only", naming the file or directory.
//
// It imports flow (the public API) and flow/flowtype (its vocabulary),
// flow/flowdef (def, and the DAG of a defined workflow's runs),
// flow/flowsqlite and flow/flowpg (the backends, in backend.go alone, which
// opens what --db names and reads its schema through their Inspect, and
// migrates a file with flowsqlite.Migrate), internal/store/storecopy (copy, which needs both
// stores), flow/flowlitestream (restore, which links Litestream), cobra and
// flow/flowui (serve). It imports no store adapter and no database driver,
// runs no SQL and reads no SQLite result code itself (internal/archtest
// checks the imports).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // operational: not found, conflict, not a database…
	exitUsage = 2 // bad flags or arguments
)

// Environment variables that supply flags.
const (
	envDB          = "FLOWLITE_DB"           // --db
	envBusyTimeout = "FLOWLITE_BUSY_TIMEOUT" // --busy-timeout
	envLogLevel    = "FLOWLITE_LOG_LEVEL"    // --log-level
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the process exit code.
// Output goes to stdout, errors to stderr; getenv reads the environment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "flowlite: %v\n", err)
	var uerr *usageError
	if errors.As(err, &uerr) || !a.started {
		// Errors cobra returns before a command's action ran (unknown
		// command, bad flag, wrong number of arguments) are usage errors.
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitError
}

// app is the state one invocation shares between its commands.
type app struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string

	dbPath      string         // --db
	schema      string         // --schema (PostgreSQL)
	pooler      string         // --pooler (PostgreSQL)
	directDB    string         // --direct-db (PostgreSQL)
	json        bool           // --json
	logLevel    string         // --log-level
	busyTimeout time.Duration  // --busy-timeout
	retention   flow.Retention // set by clean's flags
	started     bool           // a command's action began: its errors are operational

	logger *slog.Logger // set by setup from --log-level

	catalog *flowdef.Catalog // def --catalog: the steps definitions are checked against
}

// usageError is a bad flag value or argument found by a command's action;
// it exits with code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "flowlite",
		Short: "Inspect and operate a flowlite database",
		Long: `flowlite inspects and operates a flowlite database file.

The database is named by --db or the ` + envDB + ` environment variable and must
exist: flowlite never creates one, and refuses a SQLite file that is not a
flowlite database. A postgres:// or postgresql:// URL names a PostgreSQL
database instead, whose flowlite schema (--schema, default flowlite) must
exist; backup, check and checkpoint, which operate on a SQLite file, refuse
it. The CLI never runs workflows: it reads runs and records
operator actions (cancel, resume, skip, retry, signal…), which the engines
working the database pick up on their own. serve shows the same in a browser.

A write waits up to --busy-timeout for a lock another process holds, then
fails with "database is locked" and changes nothing.

Exit codes: 0 success, 1 operational error, 2 usage error.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No Args: with subcommands, cobra then reports an unknown command.
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{msg: err.Error()}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.dbPath, "db", "", "path of the database file, the files of a shard set in order (a.db,b.db), or a postgres:// URL (default $"+envDB+")")
	pf.StringVar(&a.schema, "schema", defaultSchema, "PostgreSQL schema of flowlite's tables (with a postgres:// --db)")
	pf.StringVar(&a.pooler, "pooler", "none", "what stands between a postgres:// --db and the server: none, session or transaction (PgBouncer's pool_mode)")
	pf.StringVar(&a.directDB, "direct-db", "", "behind a transaction pooler, a postgres:// URL of the server itself, for migrate up")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of a table")
	pf.StringVar(&a.logLevel, "log-level", "", "log level on stderr: debug, info, warn or error (default $"+envLogLevel+", else warn)")
	pf.DurationVar(&a.busyTimeout, "busy-timeout", 0, "how long a write waits for a lock held by another process (default $"+envBusyTimeout+", else 5s)")

	root.AddCommand(
		a.runsCommand(),
		a.showCommand(),
		a.historyCommand(),
		a.progressCommand(),
		a.changesCommand(),
		a.streamCommand(),
		a.statsCommand(),
		a.cancelCommand(),
		a.resumeCommand(),
		a.skipCommand(),
		a.retryCommand(),
		a.runNowCommand(),
		a.runAtCommand(),
		a.resetCommand(),
		a.forkCommand(),
		a.reviveCommand(),
		a.deleteCommand(),
		a.signalCommand(),
		a.deadCommand(),
		a.queuesCommand(),
		a.migrateCommand(),
		a.backupCommand(),
		a.restoreCommand(),
		a.checkCommand(),
		a.checkpointCommand(),
		a.healthCommand(),
		a.cleanCommand(),
		a.serveCommand(),
		a.copyCommand(),
		a.defCommand(),
	)
	return root
}

// setup checks the global flags (falling back on the environment) and
// builds the logger. Its errors are usage errors.
func (a *app) setup() error {
	level := a.logLevel
	if level == "" {
		level = a.getenv(envLogLevel)
	}
	var l slog.Level
	switch strings.ToLower(level) {
	case "", "warn", "warning":
		l = slog.LevelWarn
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "error":
		l = slog.LevelError
	default:
		return usageErrorf("invalid --log-level %q: must be debug, info, warn or error", level)
	}
	a.logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: l}))

	if a.busyTimeout == 0 {
		a.busyTimeout = defaultBusyTimeout
		if v := a.getenv(envBusyTimeout); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return usageErrorf("invalid %s %q: want a positive duration such as 500ms or 10s", envBusyTimeout, v)
			}
			a.busyTimeout = d
		}
	}
	if a.busyTimeout < time.Millisecond {
		return usageErrorf("invalid --busy-timeout %s: must be at least 1ms", a.busyTimeout)
	}
	return nil
}

// action adapts a command body to cobra, marking the point from which
// errors are operational rather than usage errors.
func (a *app) action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := a.setup(); err != nil {
			return err
		}
		a.started = true
		return fn(cmd, args)
	}
}

// oneRunArg accepts exactly one argument, a run ID.
func oneRunArg(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usageErrorf("missing run ID")
	case len(args) > 1:
		return usageErrorf("expected one run ID, got %d arguments", len(args))
	}
	return checkRunIDArg(args[0])
}

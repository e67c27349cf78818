// Command flowlite inspects and operates a flowlite database file.
//
//	flowlite --db app.db runs --status suspended
//	flowlite --db app.db show RUN
//	flowlite --db app.db history RUN
//	flowlite --db app.db stats
//	flowlite --db app.db cancel|resume|skip RUN
//
// The database is named by --db or the FLOWLITE_DB environment variable and
// must exist: the CLI never creates one. It never starts an engine either: it
// reads runs and records operator actions, which the engines working the
// database pick up on their own. Every read command prints a table, or JSON
// with --json.
//
// Exit codes: 0 success, 1 operational error (unknown run, a run in the
// wrong state, a file that is not a database…), 2 usage error (bad flags or
// arguments). Errors go to stderr as "flowlite: <message>".
//
// It imports flow (the public API) and cobra only; never internal/*.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // operational: not found, conflict, not a database…
	exitUsage = 2 // bad flags or arguments
)

// envDB names the environment variable that supplies --db.
const envDB = "FLOWLITE_DB"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the process exit code.
// Output goes to stdout, errors to stderr; getenv reads the environment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdout: stdout, getenv: getenv}
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
	getenv func(string) string

	dbPath  string // --db
	json    bool   // --json
	started bool   // a command's action began: its errors are operational
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
exist: flowlite never creates one. The CLI never runs workflows: it reads runs
and records operator actions (cancel, resume, skip), which the engines working
the database pick up on their own.

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
	pf.StringVar(&a.dbPath, "db", "", "path of the database file (default $"+envDB+")")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of a table")

	root.AddCommand(
		a.runsCommand(),
		a.showCommand(),
		a.historyCommand(),
		a.statsCommand(),
		a.cancelCommand(),
		a.resumeCommand(),
		a.skipCommand(),
	)
	return root
}

// action adapts a command body to cobra, marking the point from which
// errors are operational rather than usage errors.
func (a *app) action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
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
	case args[0] == "":
		return usageErrorf("empty run ID")
	}
	return nil
}

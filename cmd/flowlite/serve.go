package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowui"
)

// shutdownTimeout bounds how long serve waits for requests in flight once
// it is asked to stop.
const shutdownTimeout = 5 * time.Second

func (a *app) serveCommand() *cobra.Command {
	var addr string
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a web dashboard of the database",
		Long: `Serve an HTML dashboard of the database: queues, runs with filters, each
run's step timeline and history, suspended runs and dead letters, with
buttons for the operator actions (resume, skip, cancel, retry, requeue),
each behind a confirmation page. --read-only hides the buttons and refuses
actions with 403. Actions must come from the dashboard's own pages:
cross-origin browser requests are refused, and every action must carry the
CSRF token of the page's form (a bare curl -X POST is refused with 403).

It serves a JSON API under /api too (runs, a run, its history, queues, and
the same actions plus signal); a script GETs /api/csrf first and sends its
cookie and the X-CSRF-Token header with each action. The package flow/flowui
serves the same dashboard and API inside an application's own server.

It also serves /metrics and /healthz (200 when the database can be read, 503
otherwise). /metrics is in the Prometheus text format and read from the
database at each scrape: runs by state, queue depth, ready runs and lag, dead
letters, database and WAL size, the time of the last checkpoint; and, summed
over the reports every engine writes (see flowlite health), runs started and
finished, step and compensation durations, and claim latency by queue. A
report is at most one report interval (10s by default) behind its engine.

The dashboard has no login: bind it to localhost (the default) or put it
behind an authenticating proxy. Like the other commands it never runs
workflows: the engines of the application do, and pick up the actions
within their poll interval. It stops on SIGINT or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if addr == "" {
				return usageErrorf("empty --addr")
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return usageErrorf("invalid --addr %q: want host:port or :port (%v)", addr, err)
			}
			ctx := cmd.Context()
			with := a.withEngine
			if readOnly {
				// Nothing to write: the dashboard reads a read-only file
				// too, and leaves no -wal or -shm behind.
				with = a.withReader
			}
			return with(ctx, func(e *flow.Engine) error {
				d, err := flowui.New(e, &flowui.Options{ReadOnly: readOnly, Logger: a.logger})
				if err != nil {
					return err
				}
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				srv := &http.Server{
					Handler:           d,
					ReadHeaderTimeout: 10 * time.Second,
					ReadTimeout:       30 * time.Second,
					WriteTimeout:      60 * time.Second,
					IdleTimeout:       2 * time.Minute,
				}
				// Streams (the change feed) last as long as their clients:
				// Shutdown ends them by cancelling every request's context,
				// rather than waiting out shutdownTimeout for them.
				base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
				defer cancelBase()
				srv.BaseContext = func(net.Listener) context.Context { return base }
				srv.RegisterOnShutdown(cancelBase)
				mode := "read-write"
				if readOnly {
					mode = "read-only"
				}
				fmt.Fprintf(a.stdout, "flowlite dashboard (%s) on http://%s/\n", mode, ln.Addr())
				a.logger.Info("serving dashboard", "addr", ln.Addr().String(), "read_only", readOnly)

				served := make(chan error, 1)
				go func() { served <- srv.Serve(ln) }()
				select {
				case err := <-served:
					return fmt.Errorf("serve: %w", err)
				case <-ctx.Done():
				}
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
				defer cancel()
				err = srv.Shutdown(sctx)
				if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
					err = serr
				}
				if err != nil {
					return fmt.Errorf("serve: shut down: %w", err)
				}
				a.logger.Info("dashboard stopped")
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "localhost:8080", "address to listen on (host:port; :8080 listens on every interface)")
	f.BoolVar(&readOnly, "read-only", false, "hide the action buttons and refuse actions (403)")
	return cmd
}

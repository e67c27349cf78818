// Command export is a long data export with a live view: its one step
// reports how far it got (flow.SetProgress) and writes a log line per page
// to a stream of the run (flow.WriteStreamCtx), while the caller watches
// both as they happen, as a dashboard or an HTTP handler would: the
// progress with flow.WatchProgress, the log with flow.ReadStream, which a
// reader that went away resumes from the position after the last line it
// printed. Everything is durable, in one SQLite file: a crash mid-export
// resumes the run, and the log keeps what was written.
//
//	go run ./examples/export
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// Request says what to export.
type Request struct {
	Table string `json:"table"`
	Pages int    `json:"pages"` // of pageRows rows each
}

// Summary is what the export produced.
type Summary struct {
	Rows int    `json:"rows"`
	File string `json:"file"`
}

// pageRows is how many rows one page holds; pageTime how long a page
// takes to export (a query and a write, in a real export).
const (
	pageRows = 1000
	pageTime = 150 * time.Millisecond
)

// exportRows is the step: it exports the pages one by one, reporting its
// progress and logging each page to the run's "log" stream.
var exportRows = flow.Step[Request, Summary]{
	Name: "export_rows",
	Run: func(ctx context.Context, r Request) (Summary, error) {
		total := int64(r.Pages * pageRows)
		for page := range r.Pages {
			select {
			case <-ctx.Done():
				return Summary{}, ctx.Err()
			case <-time.After(pageTime):
			}
			done := int64((page + 1) * pageRows)
			msg := fmt.Sprintf("exported %d of %d rows of %s", done, total, r.Table)
			if err := flow.SetProgress(ctx, flow.Progress{Done: done, Total: total, Message: msg}); err != nil {
				return Summary{}, err
			}
			if err := flow.WriteStreamCtx(ctx, "log", fmt.Sprintf("page %d: rows %d-%d", page+1, done-pageRows+1, done)); err != nil {
				return Summary{}, err
			}
		}
		return Summary{Rows: int(total), File: r.Table + ".csv"}, nil
	},
}

// exportWorkflow runs the step, then says in the log that it is done.
var exportWorkflow = flow.Workflow[Request, Summary]{
	Name:    "export",
	Version: 1,
	Run: func(wc flow.Context, r Request) (Summary, error) {
		s, err := flow.Do(wc, exportRows, r)
		if err != nil {
			return Summary{}, err
		}
		if _, err := flow.WriteStream(wc, "log", "written "+s.File); err != nil {
			return Summary{}, err
		}
		return s, nil
	},
}

func main() {
	dir, err := os.MkdirTemp("", "export")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), filepath.Join(dir, "export.db"), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run exports eight pages on the database at path, printing the live
// progress and the log as they come, then the summary.
func run(ctx context.Context, path string, out io.Writer) error {
	eng, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 20 * time.Millisecond}, nil)
	if err != nil {
		return err
	}
	defer eng.Close()
	flow.Register(eng, exportWorkflow)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(ctx)

	r, err := flow.Start(ctx, eng, exportWorkflow, Request{Table: "orders", Pages: 8}, nil)
	if err != nil {
		return err
	}
	var mu sync.Mutex // one writer of out at a time
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		// The live view: every change of the step's progress, as it lands.
		errs <- flow.WatchProgress(ctx, eng, r.ID(), func(status flow.RunStatus, ps []flow.StepProgress) error {
			for _, p := range ps {
				if pct, ok := p.Percent(); ok {
					say("progress  %3.0f%%  %s", pct, p.Message)
				}
			}
			return nil
		})
	})
	wg.Go(func() {
		// The log, in order, until the run finishes and the stream ends.
		for m, err := range flow.ReadStream[string](ctx, eng, r.ID(), "log", 0) {
			if err != nil {
				errs <- err
				return
			}
			say("log       #%d %s", m.Position, m.Value)
		}
		errs <- nil
	})
	s, err := r.Result(ctx)
	wg.Wait()
	close(errs)
	for e := range errs {
		if e != nil {
			return e
		}
	}
	if err != nil {
		return err
	}
	say("summary   %d rows in %s", s.Rows, s.File)
	return nil
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtype"
)

// healthJSON is the --json output of health.
type healthJSON struct {
	Path string `json:"path"`
	// Backend is "postgres" on PostgreSQL, whose file fields (sizes, last
	// checkpoint) stay zero; absent for a SQLite file.
	Backend        string          `json:"backend,omitempty"`
	DBBytes        int64           `json:"db_bytes"`
	WALBytes       int64           `json:"wal_bytes"`
	LastCheckpoint *checkpointInfo `json:"last_checkpoint"` // null: none recorded
	// Checkpointer says who checkpoints the WAL: "flowlite", "litestream"
	// or "sqlite" (SQLite's automatic checkpoints alone); absent on
	// PostgreSQL.
	Checkpointer string `json:"checkpointer,omitempty"`
	// Replication is the file's Litestream replica, as the engine that
	// replicates it last reported; null when flowlite does not replicate
	// the file.
	Replication *replicationJSON `json:"replication,omitempty"`
	// Standby, on PostgreSQL, says the server is a standby (a read
	// replica), how far behind its primary; null on a primary and on
	// SQLite.
	Standby *standbyJSON `json:"standby,omitempty"`
	// History, on PostgreSQL with partitioned history, describes its
	// partitions; null when the history is one table, and on SQLite.
	History *historyJSON `json:"history_partitions,omitempty"`
	// Engines are the running engines' reports (live or silent); with
	// --all, the stopped ones' too.
	Engines []engineJSON `json:"engines"`
	// StoppedHidden is how many reports of stopped engines Engines leaves
	// out (0 with --all).
	StoppedHidden int `json:"stopped_engines_hidden"`
	// UnworkedQueues are the queues with pending runs that no live engine
	// works: their runs will not start. Empty when there are none.
	UnworkedQueues []unworkedJSON `json:"unworked_queues"`
	// Shards are the files of a shard set (--db a,b,...), each with its
	// sizes and last checkpoint (their engines and unworked queues are
	// the set's, above, and empty here); the sizes above are their sums.
	// Absent for one file.
	Shards []healthJSON `json:"shards,omitempty"`
}

type replicationJSON struct {
	Replica             string     `json:"replica"`
	InProcess           bool       `json:"in_process"` // read from this process's own engine
	SyncIntervalSeconds float64    `json:"sync_interval_seconds"`
	LocalTXID           uint64     `json:"local_txid"`
	ReplicaTXID         uint64     `json:"replica_txid"`
	LastSync            *time.Time `json:"last_sync"` // null: none yet
	LagSeconds          float64    `json:"lag_seconds"`
	Errors              int64      `json:"errors"`
	LastError           string     `json:"last_error,omitempty"`
	LastErrorAt         *time.Time `json:"last_error_at,omitempty"`
	ReportedAt          time.Time  `json:"reported_at"`
}

func newReplicationJSON(r *flowtype.ReplicationHealth) *replicationJSON {
	if r == nil {
		return nil
	}
	out := &replicationJSON{Replica: r.Replica, InProcess: r.InProcess, SyncIntervalSeconds: r.SyncInterval.Seconds(),
		LocalTXID: r.LocalTXID, ReplicaTXID: r.ReplicaTXID, LagSeconds: r.Lag.Seconds(), Errors: r.Errors,
		LastError: r.LastError, ReportedAt: utc(r.ReportedAt)}
	if !r.LastSync.IsZero() {
		at := utc(r.LastSync)
		out.LastSync = &at
	}
	if !r.LastErrorAt.IsZero() {
		at := utc(r.LastErrorAt)
		out.LastErrorAt = &at
	}
	return out
}

type unworkedJSON struct {
	Queue         string  `json:"queue"`
	Pending       int64   `json:"pending"`
	OldestAgeSecs float64 `json:"oldest_age_seconds"`
}

type checkpointInfo struct {
	At       time.Time               `json:"at"`
	By       string                  `json:"by"`
	Mode     flowtype.CheckpointMode `json:"mode"`
	WALBytes int64                   `json:"wal_bytes_before"`
	Busy     bool                    `json:"busy"`
	Error    string                  `json:"error,omitempty"`
}

type engineJSON struct {
	ID         string             `json:"id"`
	Host       string             `json:"host"`
	PID        int                `json:"pid"`
	StartedAt  time.Time          `json:"started_at"`
	ReportedAt time.Time          `json:"reported_at"`
	Queues     []string           `json:"queues"`
	Live       bool               `json:"live"`                 // not stopped, and reported recently
	StoppedAt  *time.Time         `json:"stopped_at,omitempty"` // null while it runs
	Metrics    flow.EngineMetrics `json:"metrics"`
}

func (a *app) healthCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Show the database file's WAL and last checkpoint, and the engines' reports",
		Long: `Show the health of the database file (its size, the size of its write-ahead
log, and the last checkpoint an engine ran on it: when, by which engine, in
which mode, and whether readers kept it from finishing), then what each
engine working on the database last reported: when it started and reported,
the queues it works, whether it is live, and the runs it started and
finished and the step attempts it ran.

Engines write their report when they start, every report interval while they
work (10s by default), at least once a minute while idle, and when they stop.
An engine is live when it has not stopped and reported recently (within three
minutes, or three report intervals if longer); a crashed one stops being live
then. Engines that stopped are left out (their number is shown): --all lists
them too. The cleaner deletes the reports of engines stopped for longer than
Config.StoppedReportRetention (24 hours by default) and of engines silent
for longer than Config.ReportRetention (7 days by default).

Last, it names each queue that has pending runs but that no live engine
works, with the number of its pending runs and the age of the oldest: those
runs will not start until an engine lists the queue in its Config.Queues.

To check the file's integrity, use flowlite check.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.withReader(ctx, func(e *flow.Engine) error {
				if e.Shards() > 1 {
					return a.shardHealth(ctx, e, all)
				}
				h, err := e.FileHealth(ctx)
				file := true
				switch {
				case isNotSupported(err):
					// PostgreSQL keeps no database file: no file section.
					file = false
					h = flow.FileHealth{Path: redactURL(a.dbName())}
				case err != nil:
					return err
				}
				reports, err := e.Reports(ctx)
				if err != nil {
					return err
				}
				reports, hidden := runningEngines(reports, all)
				unworked, err := e.UnworkedQueues(ctx)
				if err != nil {
					return err
				}
				var standby *standbyJSON
				var history *historyJSON
				if !file {
					if standby, err = a.standby(ctx); err != nil {
						return err
					}
					if history, err = historyPartitions(ctx, e); err != nil {
						return err
					}
				}
				if a.json {
					out := newHealthJSON(h, reports, unworked)
					out.StoppedHidden = hidden
					if !file {
						out.Backend = "postgres"
						out.Standby = standby
						out.History = history
					}
					return writeJSON(a.stdout, out)
				}
				return a.printHealth(h, file, standby, history, reports, hidden, unworked)
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "list the engines that stopped too")
	return cmd
}

// standbyJSON is a PostgreSQL standby's replication state.
type standbyJSON struct {
	CaughtUp bool `json:"caught_up"` // replayed all the WAL it received
	// ReplayAgeMS is how long ago, in ms, the last transaction it replayed
	// committed on the primary: its lag while not caught up.
	ReplayAgeMS int64 `json:"replay_age_ms"`
}

// standby reads whether --db is a PostgreSQL standby; nil when it is not
// (or is a SQLite file).
func (a *app) standby(ctx context.Context) (*standbyJSON, error) {
	db, err := a.database()
	if err != nil {
		return nil, err
	}
	pg, ok := db.(*pgDatabase)
	if !ok {
		return nil, nil
	}
	schema, err := pg.schema()
	if err != nil {
		return nil, err
	}
	info, err := pg.inspect(ctx, schema)
	if err != nil || !info.Standby {
		return nil, err
	}
	return &standbyJSON{CaughtUp: info.CaughtUp, ReplayAgeMS: info.ReplayAge.Milliseconds()}, nil
}

// historyJSON describes partitioned history on PostgreSQL.
type historyJSON struct {
	SpanSeconds float64 `json:"span_seconds"` // the time each partition covers
	Partitions  int     `json:"partitions"`
	Bytes       int64   `json:"bytes"` // of every partition, indexes included
	// OldestFrom is the first event time of the oldest partition; null
	// when that is the history from before partitioning (events_before).
	OldestFrom *time.Time `json:"oldest_from"`
}

// historyPartitions reads e's history partitions; nil when the history is
// one table.
func historyPartitions(ctx context.Context, e *flow.Engine) (*historyJSON, error) {
	hp, err := e.HistoryPartitions(ctx)
	if err != nil || hp.Span == 0 {
		return nil, err
	}
	out := &historyJSON{SpanSeconds: hp.Span.Seconds(), Partitions: len(hp.Partitions)}
	for _, p := range hp.Partitions {
		out.Bytes += p.Bytes
	}
	if len(hp.Partitions) > 0 && !hp.Partitions[0].From.IsZero() {
		from := utc(hp.Partitions[0].From)
		out.OldestFrom = &from
	}
	return out, nil
}

// runningEngines returns the reports of the engines that did not stop
// (live or silent: a silent one may have crashed, which an operator must
// see), or all of them when all is set, and how many it left out. Every
// short-lived process leaves a stopped report behind until the cleaner
// deletes it: listed by default, they would bury the engines that run.
func runningEngines(reports []flow.Report, all bool) ([]flow.Report, int) {
	if all {
		return reports, 0
	}
	out := reports[:0:0]
	for _, r := range reports {
		if r.StoppedAt.IsZero() {
			out = append(out, r)
		}
	}
	return out, len(reports) - len(out)
}

func newHealthJSON(h flow.FileHealth, reports []flow.Report, unworked []flow.UnworkedQueue) healthJSON {
	out := healthJSON{Path: h.Path, DBBytes: h.DBBytes, WALBytes: h.WALBytes, Engines: make([]engineJSON, len(reports)),
		UnworkedQueues: make([]unworkedJSON, len(unworked)), Checkpointer: string(h.Checkpointer),
		Replication: newReplicationJSON(h.Replication)}
	if !h.LastCheckpoint.IsZero() {
		out.LastCheckpoint = &checkpointInfo{
			At: utc(h.LastCheckpoint), By: h.LastCheckpointBy, Mode: h.LastCheckpointMode,
			WALBytes: h.LastCheckpointWALBytes, Busy: h.LastCheckpointBusy, Error: h.LastCheckpointError,
		}
	}
	for i, r := range reports {
		out.Engines[i] = engineJSON{ID: r.Owner, Host: r.Host, PID: r.PID,
			StartedAt: utc(r.StartedAt), ReportedAt: utc(r.ReportedAt), Metrics: r.Metrics,
			Queues: append([]string{}, r.Queues...), Live: r.Live(time.Now())}
		if !r.StoppedAt.IsZero() {
			at := utc(r.StoppedAt)
			out.Engines[i].StoppedAt = &at
		}
	}
	for i, q := range unworked {
		out.UnworkedQueues[i] = unworkedJSON{Queue: q.Queue, Pending: q.Pending, OldestAgeSecs: q.OldestAge.Seconds()}
	}
	return out
}

// engineState says whether an engine runs, as far as its report tells.
func engineState(r flow.Report) string {
	switch {
	case !r.StoppedAt.IsZero():
		return "stopped"
	case r.Live(time.Now()):
		return "live"
	default:
		return "silent" // crashed, or its machine is unreachable
	}
}

func (a *app) printHealth(h flow.FileHealth, file bool, standby *standbyJSON, history *historyJSON, reports []flow.Report, hidden int, unworked []flow.UnworkedQueue) error {
	if !file {
		if _, err := fmt.Fprintf(a.stdout, "DATABASE  %s (PostgreSQL, schema %s: no file or WAL to show)\n", cell(h.Path, 0), a.schema); err != nil {
			return err
		}
		if standby != nil {
			state := "caught up"
			if !standby.CaughtUp {
				state = "replaying"
			}
			age := time.Duration(standby.ReplayAgeMS) * time.Millisecond
			if _, err := fmt.Fprintf(a.stdout, "STANDBY   read-only replica, %s; last replayed commit %s ago (its lag while replaying)\n", state, age.Round(time.Millisecond)); err != nil {
				return err
			}
		}
		if history != nil {
			oldest := "the history from before partitioning"
			if history.OldestFrom != nil {
				oldest = tableTime(*history.OldestFrom)
			}
			if _, err := fmt.Fprintf(a.stdout, "HISTORY   partitioned by %s: %d partitions, %s, the oldest from %s\n",
				time.Duration(history.SpanSeconds*float64(time.Second)), history.Partitions, byteSize(history.Bytes), oldest); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintln(a.stdout); err != nil {
			return err
		}
		return a.printEngines(reports, hidden, unworked)
	}
	if err := a.printFile(h); err != nil {
		return err
	}
	return a.printEngines(reports, hidden, unworked)
}

// shardHealth is health on a shard set: each file's section, then the
// engines of all shards.
func (a *app) shardHealth(ctx context.Context, e *flow.Engine, all bool) error {
	reports, err := e.Reports(ctx)
	if err != nil {
		return err
	}
	reports, hidden := runningEngines(reports, all)
	unworked, err := e.UnworkedQueues(ctx)
	if err != nil {
		return err
	}
	files := make([]flow.FileHealth, e.Shards())
	for i := range files {
		if files[i], err = e.Shard(i).FileHealth(ctx); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	if a.json {
		out := newHealthJSON(flow.FileHealth{Path: a.dbName()}, reports, unworked)
		out.StoppedHidden = hidden
		for _, h := range files {
			out.DBBytes += h.DBBytes
			out.WALBytes += h.WALBytes
			// The engines and queues are the set's, listed above.
			out.Shards = append(out.Shards, newHealthJSON(h, nil, nil))
		}
		return writeJSON(a.stdout, out)
	}
	for _, h := range files {
		if err := a.printFile(h); err != nil {
			return err
		}
	}
	return a.printEngines(reports, hidden, unworked)
}

// printFile prints the sizes and the last checkpoint of a database file.
func (a *app) printFile(h flow.FileHealth) error {
	last := "none recorded"
	if !h.LastCheckpoint.IsZero() {
		last = fmt.Sprintf("%s (%s ago), %s of a %s WAL, by %s", tableTime(h.LastCheckpoint),
			roughAge(time.Since(h.LastCheckpoint)), h.LastCheckpointMode, byteSize(h.LastCheckpointWALBytes), h.LastCheckpointBy)
		switch {
		case h.LastCheckpointError != "":
			last += "; failed: " + h.LastCheckpointError
		case h.LastCheckpointBusy:
			last += "; busy: readers or writers kept it from finishing"
		}
	}
	facts := newTable(a.stdout, "FILE", cell(h.Path, 0))
	facts.row("size", byteSize(h.DBBytes))
	facts.row("WAL", byteSize(h.WALBytes))
	facts.row("last checkpoint", last)
	if h.Checkpointer != "" {
		facts.row("checkpoints by", checkpointerText(h.Checkpointer))
	}
	if r := h.Replication; r != nil {
		facts.row("replica", cell(r.Replica, 0))
		facts.row("replica lag", replicaLag(r))
		synced := "never"
		if !r.LastSync.IsZero() {
			synced = fmt.Sprintf("%s (%s ago)", tableTime(r.LastSync), roughAge(time.Since(r.LastSync)))
		}
		facts.row("replica last sync", synced)
		if r.Errors > 0 {
			facts.row("replica errors", fmt.Sprintf("%d, the last at %s: %s", r.Errors, tableTime(r.LastErrorAt), cell(r.LastError, 0)))
		}
	}
	if err := facts.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.stdout)
	return err
}

// printEngines prints the engines' reports, how many stopped ones it
// leaves out, and the unworked queues.
func (a *app) printEngines(reports []flow.Report, hidden int, unworked []flow.UnworkedQueue) error {
	switch {
	case len(reports) == 0 && hidden == 0:
		if _, err := fmt.Fprintln(a.stdout, "no engine has reported"); err != nil {
			return err
		}
	case len(reports) == 0:
		if _, err := fmt.Fprintln(a.stdout, "no engine is running"); err != nil {
			return err
		}
	default:
		t := newTable(a.stdout, "ENGINE", "HOST", "PID", "STATE", "QUEUES", "STARTED", "REPORTED", "STARTED RUNS", "FINISHED RUNS", "STEP ATTEMPTS", "WRITE FAILURES")
		var failing []flow.Report
		for _, r := range reports {
			t.row(cell(r.Owner, 0), cell(r.Host, 0), strconv.Itoa(r.PID), engineState(r), cell(strings.Join(r.Queues, ","), 0),
				tableTime(r.StartedAt), tableTime(r.ReportedAt),
				strconv.FormatInt(r.Metrics.RunsStarted, 10), strconv.FormatInt(r.Metrics.RunsFinishedTotal(), 10),
				strconv.FormatUint(r.Metrics.AttemptSeconds["step"].Count, 10), strconv.FormatInt(r.Metrics.WriteFailures, 10))
			if r.Metrics.LastWriteError != "" {
				failing = append(failing, r)
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		for _, r := range failing {
			_, err := fmt.Fprintf(a.stdout, "engine %s: last failed write at %s: %s\n", r.Owner, tableTime(r.Metrics.LastWriteAt), r.Metrics.LastWriteError)
			if err != nil {
				return err
			}
		}
	}
	if hidden > 0 {
		if _, err := fmt.Fprintf(a.stdout, "%s not shown (--all lists them)\n", plural(hidden, "stopped engine")); err != nil {
			return err
		}
	}
	if len(unworked) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(a.stdout, "\nqueues with pending runs that no live engine works (list them in an engine's Config.Queues):"); err != nil {
		return err
	}
	t := newTable(a.stdout, "UNWORKED QUEUE", "PENDING", "OLDEST")
	for _, q := range unworked {
		t.row(cell(q.Queue, 0), strconv.FormatInt(q.Pending, 10), roughAge(q.OldestAge))
	}
	return t.flush()
}

// roughAge prints a duration to the second, or "0s" for less.
func roughAge(d time.Duration) string {
	return max(d, 0).Truncate(time.Second).String()
}

// checkpointerText says who checkpoints a file's WAL, for people.
func checkpointerText(c flowtype.Checkpointer) string {
	switch c {
	case flowtype.CheckpointerEngine:
		return "flowlite (the engines' WAL watch)"
	case flowtype.CheckpointerLitestream:
		return "Litestream (flowlite leaves checkpoints to it)"
	case flowtype.CheckpointerSQLite:
		return "SQLite's automatic checkpoints only"
	}
	return string(c)
}

// replicaLag says how far the replica is behind, and how fresh that is.
func replicaLag(r *flowtype.ReplicationHealth) string {
	var s string
	switch {
	case r.Lag > 0:
		s = fmt.Sprintf("%s behind (transaction %d of %d)", r.Lag.Round(time.Millisecond), r.ReplicaTXID, r.LocalTXID)
	case r.ReplicaTXID >= r.LocalTXID && r.LocalTXID > 0:
		s = fmt.Sprintf("in sync (transaction %d)", r.ReplicaTXID)
	default:
		s = fmt.Sprintf("transaction %d of %d", r.ReplicaTXID, r.LocalTXID)
	}
	s += fmt.Sprintf("; recovery point %s", r.SyncInterval)
	if !r.InProcess {
		s += fmt.Sprintf("; as the replicating engine reported %s ago", roughAge(time.Since(r.ReportedAt)))
	}
	return s
}

// plural returns "1 noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

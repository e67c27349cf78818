package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtype"
)

// backupJSON is the --json output of backup.
type backupJSON struct {
	Source  string  `json:"source"`
	Dest    string  `json:"dest"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

func (a *app) backupCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "backup DST",
		Short: "Write a consistent copy of the database to DST",
		Long: `Write a consistent, compact copy of the database to the new file DST while
engines keep working (SQLite's VACUUM INTO, which reads one snapshot). The
copy is synced to disk and is an ordinary flowlite database. DST must not
exist (exit code 1 otherwise); a copy made with cp while an engine works the
database may miss what its WAL holds.`,
		Args: oneDestination,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			dst := args[0]
			ctx := cmd.Context()
			if err := a.fileOnly("backup", "it copies a SQLite database file; back PostgreSQL up with pg_dump --schema "+a.schema); err != nil {
				return err
			}
			return a.withEngine(ctx, func(e *flow.Engine) error {
				srcs, err := shardFiles(a.dbName())
				if err != nil {
					return err
				}
				dsts := []string{dst}
				if len(srcs) > 1 {
					// One destination per shard file, in the same order:
					// the copies record their place in the set, so they
					// open as the set again.
					if dsts, err = shardFiles(dst); err != nil {
						return err
					}
					if len(dsts) != len(srcs) {
						return usageErrorf("backup of a set of %d shard files: pass %d comma-separated destinations, got %d", len(srcs), len(srcs), len(dsts))
					}
				}
				for _, d := range dsts {
					if _, err := os.Lstat(d); err == nil {
						return fmt.Errorf("backup to %s: %w: flowlite does not overwrite files", d, fs.ErrExist)
					}
				}
				var out []backupJSON
				for i, d := range dsts {
					stop := a.progress("backing up")
					start := time.Now()
					err := e.Shard(i).Backup(ctx, d)
					stop()
					if err != nil {
						return fmt.Errorf("backup to %s: %w", d, err)
					}
					elapsed := time.Since(start)
					info, err := os.Stat(d)
					if err != nil {
						return fmt.Errorf("backup to %s: %w", d, err)
					}
					out = append(out, backupJSON{Source: srcs[i], Dest: d, Bytes: info.Size(), Seconds: elapsed.Seconds()})
					if !a.json {
						if _, err := fmt.Fprintf(a.stdout, "backed up %s to %s (%s) in %s\n", srcs[i], d, byteSize(info.Size()), elapsed.Round(time.Millisecond)); err != nil {
							return err
						}
					}
				}
				switch {
				case !a.json:
					return nil
				case len(out) == 1:
					return writeJSON(a.stdout, out[0])
				default:
					return writeJSON(a.stdout, out) // one object per shard
				}
			})
		}),
	}
}

// checkJSON is the --json output of check.
type checkJSON struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

func (a *app) checkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Check the integrity of the database file",
		Long: `Run SQLite's integrity check over the whole database file, then check that
every stored value (run, step and schedule inputs, outputs, signal payloads)
is JSON, naming the run, step or signal of each damaged one. It reads every
page, so it takes a while on a large file, but it does not block engines.
Exit code 0 when the file is sound, 1 when problems were found (they are
printed) or the check could not run.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := a.fileOnly("check", "it checks a SQLite database file; PostgreSQL checks its own pages (see amcheck)"); err != nil {
				return err
			}
			return a.withReader(ctx, func(e *flow.Engine) error {
				stop := a.progress("checking")
				problems, err := e.Check(ctx)
				stop()
				if err != nil {
					return fmt.Errorf("check: %w", err)
				}
				if a.json {
					if problems == nil {
						problems = []string{}
					}
					if err := writeJSON(a.stdout, checkJSON{OK: len(problems) == 0, Problems: problems}); err != nil {
						return err
					}
				} else if len(problems) == 0 {
					fmt.Fprintln(a.stdout, "ok: the database file is sound")
				} else {
					for _, p := range problems {
						fmt.Fprintln(a.stdout, cell(p, 0))
					}
				}
				if len(problems) > 0 {
					return fmt.Errorf("check found %d problem(s): restore a backup, or copy what is readable with sqlite3 .recover", len(problems))
				}
				return nil
			})
		}),
	}
}

// checkpointJSON is the --json output of checkpoint.
type checkpointJSON struct {
	Mode           flowtype.CheckpointMode `json:"mode"`
	Busy           bool                    `json:"busy"`
	WALFrames      int                     `json:"wal_frames"`
	Checkpointed   int                     `json:"checkpointed_frames"`
	WALBytesBefore int64                   `json:"wal_bytes_before"`
	WALBytesAfter  int64                   `json:"wal_bytes_after"`
}

func (a *app) checkpointCommand() *cobra.Command {
	var mode string
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Copy the WAL into the database file",
		Long: `Checkpoint the write-ahead log now: copy its frames into the database file
and, with the default mode truncate, shrink the WAL file to zero bytes.
Engines do this by themselves; this is for operators (e.g. before copying a
file whose engines are stopped). Modes: passive (never waits), full,
restart, truncate (default). A checkpoint that readers or writers kept from
finishing exits with code 1.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			m := flowtype.CheckpointMode(strings.ToUpper(mode))
			if !m.Valid() {
				return usageErrorf("invalid --mode %q: must be passive, full, restart or truncate", mode)
			}
			ctx := cmd.Context()
			if err := a.fileOnly("checkpoint", "it checkpoints a SQLite write-ahead log; PostgreSQL runs its own checkpoints"); err != nil {
				return err
			}
			return a.withEngine(ctx, func(e *flow.Engine) error {
				files, err := shardFiles(a.dbName())
				if err != nil {
					return err
				}
				for i := range e.Shards() {
					var label string
					if len(files) > 1 {
						label = files[i] + ": "
					}
					if err := a.checkpoint(ctx, e.Shard(i), m, label); err != nil {
						if e.Shards() > 1 {
							return fmt.Errorf("shard %d: %w", i, err)
						}
						return err
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&mode, "mode", "truncate", "passive, full, restart or truncate")
	return cmd
}

// checkpoint checkpoints the file of e (one shard's on a set) and prints
// what it did: one line, after label, or one JSON object, per file.
func (a *app) checkpoint(ctx context.Context, e *flow.Engine, m flowtype.CheckpointMode, label string) error {
	before, err := e.FileHealth(ctx)
	if err != nil {
		return err
	}
	res, err := e.Checkpoint(ctx, m)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	after, err := e.FileHealth(ctx)
	if err != nil {
		return err
	}
	if a.json {
		err = writeJSON(a.stdout, checkpointJSON{Mode: res.Mode, Busy: res.Busy, WALFrames: res.WALFrames,
			Checkpointed: res.Checkpointed, WALBytesBefore: before.WALBytes, WALBytesAfter: after.WALBytes})
	} else {
		_, err = fmt.Fprintf(a.stdout, "%scheckpoint %s: %d of %d WAL frames in the database file; WAL %s -> %s\n", label,
			strings.ToLower(string(res.Mode)), res.Checkpointed, res.WALFrames, byteSize(before.WALBytes), byteSize(after.WALBytes))
	}
	if err != nil {
		return err
	}
	if res.Busy {
		return errors.New("checkpoint did not finish: other connections kept the WAL busy; try again, or use --mode passive")
	}
	return nil
}

// byteSize prints n bytes for people.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// oneDestination is the Args check of the commands that write a new file
// (backup, restore): one non-empty destination path.
func oneDestination(_ *cobra.Command, args []string) error {
	switch {
	case len(args) != 1:
		return usageErrorf("expected one destination path, got %d arguments", len(args))
	case args[0] == "":
		return usageErrorf("empty destination path")
	}
	return nil
}

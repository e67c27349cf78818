package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow/flowlitestream"
)

// restoreJSON is the --json output of restore, one object per file.
type restoreJSON struct {
	Replica string     `json:"replica"`
	Dest    string     `json:"dest"`
	At      *time.Time `json:"at,omitempty"` // the point asked for; null: the newest
	TXID    uint64     `json:"txid,omitempty"`
	Bytes   int64      `json:"bytes"`
	Seconds float64    `json:"seconds"`
}

func (a *app) restoreCommand() *cobra.Command {
	var replica, at, txid string
	cmd := &cobra.Command{
		Use:   "restore --replica REPLICA DST",
		Short: "Restore a database file from its Litestream replica",
		Long: `Restore the database file that a Litestream replica holds into the new file
DST: the replica an engine wrote with flowsqlite.Options.Replication
(flowlitestream), or a
litestream process beside the engines (the format is Litestream's own, so
litestream restore reads the same replicas). REPLICA is a directory or a
file:// URL; for replicas in object storage (s3://…), use litestream
restore, which links their clients.

--at restores the file as it was at that moment (point in time): a time
(2006-01-02T15:04:05, RFC 3339; local unless it has a zone) or a duration
before now (90s, 15m, 2h, 3d); the replica keeps what this needs for its
retention (24h by default). --txid restores to a Litestream transaction
instead. Without either, the newest state the replica holds is restored.

The restored file is checked (quick_check) and is an ordinary flowlite
database: open it with --db, or move it where the engines expect it while
they are stopped. DST must not exist (exit code 1 otherwise).

A shard set restores file by file: give the set's replica (the directory
Options.Replication.URL named) and the files' new paths, comma-separated,
under the base names the set's files had; each restores from
REPLICA/<base name>.

--db does not apply.`,
		Args: oneDestination,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if replica == "" {
				return usageErrorf("restore needs --replica: the directory or file:// URL of the replica")
			}
			opts := flowlitestream.RestoreOptions{Logger: a.logger}
			if at != "" && txid != "" {
				return usageErrorf("give --at or --txid, not both")
			}
			if at != "" {
				t, err := parseWhen(at, time.Now())
				if err != nil {
					return usageErrorf("invalid --at %q: %v", at, err)
				}
				opts.At = t
			}
			if txid != "" {
				n, err := strconv.ParseUint(txid, 0, 64)
				if err != nil || n == 0 {
					return usageErrorf("invalid --txid %q: want a positive transaction ID (decimal, or hex with 0x)", txid)
				}
				opts.TXID = n
			}
			dsts, err := shardFiles(args[0])
			if err != nil {
				return err
			}
			for _, d := range dsts {
				if _, err := os.Lstat(d); err == nil {
					return fmt.Errorf("restore to %s: file exists: flowlite does not overwrite files", d)
				}
			}
			var out []restoreJSON
			for _, dst := range dsts {
				from := replica
				if len(dsts) > 1 {
					from = filepath.Join(replica, filepath.Base(dst))
				}
				stop := a.progress("restoring")
				start := time.Now()
				err := flowlitestream.Restore(cmd.Context(), from, dst, &opts)
				stop()
				if err != nil {
					return err
				}
				info, err := os.Stat(dst)
				if err != nil {
					return fmt.Errorf("restore to %s: %w", dst, err)
				}
				r := restoreJSON{Replica: from, Dest: dst, TXID: opts.TXID, Bytes: info.Size(), Seconds: time.Since(start).Seconds()}
				if !opts.At.IsZero() {
					t := utc(opts.At)
					r.At = &t
				}
				out = append(out, r)
				if !a.json {
					point := "its newest state"
					switch {
					case !opts.At.IsZero():
						point = "its state at " + tableTime(opts.At)
					case opts.TXID != 0:
						point = fmt.Sprintf("transaction %d", opts.TXID)
					}
					if _, err := fmt.Fprintf(a.stdout, "restored %s from %s (%s) to %s in %s\n", point, from,
						byteSize(info.Size()), dst, time.Since(start).Round(time.Millisecond)); err != nil {
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
				return writeJSON(a.stdout, out)
			}
		}),
	}
	cmd.Flags().StringVar(&replica, "replica", "", "the replica: a directory or file:// URL")
	cmd.Flags().StringVar(&at, "at", "", "restore the file as it was at this time, or this long ago (point in time)")
	cmd.Flags().StringVar(&txid, "txid", "", "restore the file as it was after this Litestream transaction")
	return cmd
}

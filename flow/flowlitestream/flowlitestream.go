// Package flowlitestream replicates flowlite's SQLite files with Litestream
// (github.com/benbjohnson/litestream v0.5.18), run in the engine's process,
// and restores them:
//
//	eng, err := flowsqlite.Open(ctx, "app.db", cfg, &flowsqlite.Options{
//		Replication: &flowlitestream.Replication{URL: "/mnt/backup/app"},
//	})
//
// It is a package of its own so that a program that does not replicate
// links no Litestream, and no net/http and net/http/pprof with it (whose
// init registers handlers on http.DefaultServeMux: a program that imports
// this package and serves that mux serves /debug/pprof).
//
// See docs/backups.md for the recovery point, restores and the set-up with
// Litestream as a process of its own.
//
// It imports flow/flowsqlite, flow/flowtype, Litestream's core and file
// packages (benbjohnson/litestream) and its LTX format (superfly/ltx).
package flowlitestream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"

	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// Replication replicates the database file with Litestream, run inside the
// engine's process, to one replica from which Restore brings the file
// back, as it is or as it was at an earlier moment: a
// flowsqlite.Replicator for flowsqlite.Options.Replication.
//
// While it replicates, Litestream alone checkpoints the WAL: flowlite's own
// checkpoints are off (Engine.Checkpoint is refused), since a checkpoint
// that restarted the WAL before Litestream copied it would cost the replica
// commits. The engine paces them (checkpoint.go): Litestream checkpoints
// every flowsqlite.Options.CheckpointInterval while the WAL is in use, and
// at once past half of WALLimit, with the engine's writer held so that
// Litestream's connection gets the write lock.
//
// Each Litestream database has one replica: Litestream 0.5 replicates a
// file to exactly one place, and two replicators on one file would be two
// checkpointers. To keep a second copy, copy the replica.
type Replication struct {
	// URL names the replica: a directory (a path, or a file:// URL), or a
	// URL of any scheme whose Litestream package the program links, e.g.
	// s3://bucket/prefix after
	//
	//	import _ "github.com/benbjohnson/litestream/s3"
	//
	// (this package links only the file replica, so that a program that
	// replicates to a directory links no cloud SDK). On a shard set, each
	// file replicates to URL/<file's base name>.
	URL string
	// Client, when set instead of URL, makes the replica client of the
	// database file at path: any litestream.ReplicaClient, e.g. one
	// configured in code rather than by URL.
	Client func(path string) (litestream.ReplicaClient, error)
	// SyncInterval is the recovery point: a commit acknowledged more than
	// SyncInterval before the machine is lost is on the replica (unless the
	// replica itself falls behind, which is logged and shown by
	// Engine.FileHealth). Litestream copies the WAL every quarter and
	// uploads every half of it, so a replica that charges per write (S3)
	// gets about two writes per SyncInterval while the engine writes.
	// Default 1s.
	SyncInterval time.Duration
	// Retention is how long the replica keeps what a point-in-time
	// restore needs. Default 24h.
	Retention time.Duration
	// Logger receives Litestream's logs (and flowlite's warning when the
	// replica falls behind); default slog.Default().
	Logger *slog.Logger
}

var _ flowsqlite.Replicator = (*Replication)(nil)

// Replicate starts Litestream on one file of an engine as it opens it.
func (r *Replication) Replicate(ctx context.Context, f flowsqlite.ReplicaFile) (flowsqlite.Replica, error) {
	if r.SyncInterval < 0 || r.Retention < 0 {
		return nil, fmt.Errorf("replicate %s: SyncInterval and Retention must not be negative", f.Path)
	}
	client, name, err := r.client(f.Path, f.Shards)
	if err != nil {
		return nil, fmt.Errorf("replicate %s: %w", f.Path, err)
	}
	w, err := start(ctx, f, client, name, r)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// client returns the replica client of the file at path and its name for
// people.
func (r *Replication) client(path string, shards int) (litestream.ReplicaClient, string, error) {
	if r.Client != nil {
		if r.URL != "" {
			return nil, "", errors.New("set Replication.URL or Replication.Client, not both")
		}
		c, err := r.Client(path)
		if err != nil {
			return nil, "", err
		}
		if c == nil {
			return nil, "", errors.New("Replication.Client returned no client")
		}
		return c, c.Type(), nil
	}
	u := r.URL
	if u == "" {
		return nil, "", errors.New("Replication needs a URL or a Client")
	}
	if shards > 1 {
		u = joinReplica(u, filepath.Base(path))
	}
	return ReplicaClient(u)
}

// ReplicaClient returns the Litestream client of the replica at u (a
// directory, a file:// URL, or a URL of a scheme whose Litestream package
// the program links) and its name for logs, without credentials.
func ReplicaClient(u string) (litestream.ReplicaClient, string, error) {
	if !litestream.IsURL(u) {
		if u == "" {
			return nil, "", errors.New("replica: empty path")
		}
		abs, err := filepath.Abs(u)
		if err != nil {
			return nil, "", fmt.Errorf("replica %s: %w", u, err)
		}
		return file.NewReplicaClient(abs), abs, nil
	}
	name := redact(u)
	c, err := litestream.NewReplicaClientFromURL(u)
	if err != nil {
		if strings.Contains(err.Error(), "unsupported replica URL scheme") {
			return nil, "", fmt.Errorf("replica %s: %w (flowlitestream links only file replicas; import the scheme's package, e.g. _ \"github.com/benbjohnson/litestream/s3\")", name, err)
		}
		return nil, "", fmt.Errorf("replica %s: %w", name, err)
	}
	return c, name, nil
}

// joinReplica names the replica of one shard file, name, under the set's
// replica u.
func joinReplica(u, name string) string {
	if !litestream.IsURL(u) {
		return filepath.Join(u, name)
	}
	if p, err := url.Parse(u); err == nil {
		p.Path = strings.TrimSuffix(p.Path, "/") + "/" + name
		return p.String()
	}
	return strings.TrimSuffix(u, "/") + "/" + name
}

// redact drops the credentials and query (which may hold keys) of a URL.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "replica"
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}

// RestoreOptions say what Restore brings back. A nil *RestoreOptions
// restores the newest state the replica holds.
type RestoreOptions struct {
	// At restores the file as it was at that moment (point in time), to
	// the last transaction the replica holds from before it.
	At time.Time
	// TXID restores the file as it was after that Litestream transaction.
	// At most one of At and TXID may be set.
	TXID uint64
	// Logger receives Litestream's logs of the restore; default
	// slog.Default().
	Logger *slog.Logger
}

// Restore writes the database file that replica holds (a directory or
// URL, as Replication.URL names it) to the new file dst, checks its pages
// and leaves it ready for Open. An existing dst is refused
// (errors.Is(err, fs.ErrExist)) and left as it is, as is a replica that
// holds nothing for the point asked for.
//
// It is the library's form of `flowlite restore` (and of `litestream
// restore`, which restores the same replicas). A shard set restores file by
// file: the replica of each file is replica/<file's base name>.
func Restore(ctx context.Context, replica, dst string, opts *RestoreOptions) error {
	client, _, err := ReplicaClient(replica)
	if err != nil {
		return fmt.Errorf("restore to %s: %w", dst, err)
	}
	return RestoreFrom(ctx, client, dst, opts)
}

// RestoreFrom is Restore from a replica client of the caller's making.
func RestoreFrom(ctx context.Context, client litestream.ReplicaClient, dst string, opts *RestoreOptions) error {
	var o RestoreOptions
	if opts != nil {
		o = *opts
	}
	return restore(ctx, client, dst, o)
}

package flowlitestream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// restore writes the database that client's replica holds to the new file
// dst, checks it (quick_check) and leaves it ready to open. An existing
// dst is refused (errors.Is(err, fs.ErrExist)) and left as it is.
func restore(ctx context.Context, client litestream.ReplicaClient, dst string, opts RestoreOptions) error {
	switch {
	case dst == "":
		return errors.New("restore: destination path is empty")
	case !opts.At.IsZero() && opts.TXID != 0:
		return fmt.Errorf("restore to %s: give a time or a transaction ID, not both", dst)
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("restore to %s: %w: refusing to overwrite it", dst, fs.ErrExist)
	}
	if err := client.Init(ctx); err != nil {
		return fmt.Errorf("restore to %s: open the replica: %w", dst, err)
	}
	o := litestream.NewRestoreOptions()
	o.OutputPath, o.Timestamp, o.TXID = dst, opts.At, ltx.TXID(opts.TXID)
	o.IntegrityCheck = litestream.IntegrityCheckQuick
	// A replica logs through its database's logger, so the restore gets a
	// database that is never opened; Close drops the metrics NewDB made.
	db := litestream.NewDB(dst)
	if opts.Logger != nil {
		db.Logger = opts.Logger
	}
	defer db.Close(context.WithoutCancel(ctx))
	if err := litestream.NewReplicaWithClient(db, client).Restore(ctx, o); err != nil {
		if errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) {
			return fmt.Errorf("restore to %s: the replica holds nothing for that point: %w", dst, err)
		}
		return fmt.Errorf("restore to %s: %w", dst, err)
	}
	return nil
}

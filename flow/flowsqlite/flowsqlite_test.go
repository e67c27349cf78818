package flowsqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "flow.db") }

// TestLeaseMustOutlastBusyTimeout: a heartbeat may wait BusyTimeout for
// the lock, so a lease shorter than a heartbeat interval plus that wait
// could lapse under a live worker. Open refuses it, naming the values.
func TestLeaseMustOutlastBusyTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  flow.Config
		busy time.Duration // flowsqlite.Options.BusyTimeout
		want string        // "" = accepted
	}{
		{"default busy timeout", flow.Config{LeaseTimeout: time.Second}, 0,
			"lease timeout 1s must be longer than the heartbeat interval 333.333333ms plus the busy timeout 5s"},
		{"equal", flow.Config{LeaseTimeout: 5 * time.Second, HeartbeatInterval: time.Second}, 4 * time.Second,
			"lease timeout 5s must be longer than the heartbeat interval 1s plus the busy timeout 4s"},
		{"negative busy timeout", flow.Config{}, -time.Second, "busy timeout must not be negative, got -1s"},
		{"short lease, short wait", flow.Config{LeaseTimeout: time.Second}, 500 * time.Millisecond, ""},
		{"defaults", flow.Config{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := flowsqlite.Open(t.Context(), dbPath(t), &tc.cfg, &flowsqlite.Options{BusyTimeout: tc.busy})
			if err == nil {
				e.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestNewBusyTimeoutMustMatchPool: New cannot change the busy_timeout of
// the caller's pool, so a different Options.BusyTimeout is refused rather
// than ignored.
func TestNewBusyTimeoutMustMatchPool(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	db, err := sql.Open("sqlite", flowsqlite.DSNBusy(path, flowsqlite.SynchronousFull, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := flowsqlite.New(t.Context(), db, &flow.Config{}, &flowsqlite.Options{BusyTimeout: time.Second}); err == nil ||
		!strings.Contains(err.Error(), "Options.BusyTimeout is 1s but the pool's busy_timeout is 2s") {
		t.Fatalf("New with a mismatched busy timeout: %v", err)
	}
	e, err := flowsqlite.New(context.Background(), db, &flow.Config{}, &flowsqlite.Options{BusyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

// Open refuses, changing nothing, a file that is not a database, a
// directory and a durability setting it does not offer.
func TestOpenRefusesFilesItCannotUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	notDB := dbPath(t)
	content := []byte("this is a text file, not a database\n" + strings.Repeat("x", 4096))
	if err := os.WriteFile(notDB, content, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := flowsqlite.Open(ctx, notDB, nil, nil)
	if !errors.Is(err, flow.ErrNotDatabase) || !strings.Contains(err.Error(), notDB) {
		t.Fatalf("open text file: err = %v, want ErrNotDatabase naming the path", err)
	}
	if got, _ := os.ReadFile(notDB); string(got) != string(content) {
		t.Fatal("the refused file was modified")
	}
	if _, err := flowsqlite.Open(ctx, t.TempDir(), nil, nil); !errors.Is(err, flow.ErrNotDatabase) {
		t.Fatalf("open a directory: err = %v, want ErrNotDatabase", err)
	}
	if _, err := flowsqlite.Open(ctx, dbPath(t), nil, &flowsqlite.Options{Synchronous: "OFF"}); err == nil {
		t.Fatal("open with synchronous OFF: want an error")
	}
}

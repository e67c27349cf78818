package flow_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

var twice = flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) { return 2 * n, nil }}

var twiceWF = flow.Workflow[int, int]{Name: "double", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	return flow.Do(wc, twice, n)
}}

// flipFirstByte flips the high bit of the first byte of a stored value
// through a raw connection, as a bad sector or a stray write would. (A flip
// of a low bit can leave valid JSON, '2' becoming '3': no check short of a
// checksum sees that.)
func flipFirstByte(t *testing.T, path, update, selectOld string, args ...any) {
	t.Helper()
	db := rawDB(t, path)
	var old []byte
	if err := db.QueryRow(selectOld, args...).Scan(&old); err != nil {
		t.Fatalf("read stored value: %v", err)
	}
	bad := append([]byte{}, old...)
	bad[0] ^= 0x80
	if _, err := db.Exec(update, append([]any{bad}, args...)...); err != nil {
		t.Fatalf("damage stored value: %v", err)
	}
	db.Close()
}

// TestCheckFindsDamagedPayloads damages stored values byte by byte and
// expects Check, which used to report only SQLite's integrity_check (blind
// to the bytes of a value), to name each damaged one.
func TestCheckFindsDamagedPayloads(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "Engine.Check (integrity_check over a damaged file)")
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	flow.Register(e, twiceWF)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, twiceWF, 21, &flow.StartOptions{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	// A run nobody works, holding a signal it has not received yet.
	if _, err := flow.Start(ctx, e, twiceWF, 1, &flow.StartOptions{RunID: "r2", Queue: "unworked"}); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, "r2", "late", map[string]int{"n": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if problems, err := e.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("check of a sound database: %v %v", problems, err)
	}

	flipFirstByte(t, path, "UPDATE flowlite_runs SET input = ? WHERE id = ?", "SELECT input FROM flowlite_runs WHERE id = ?", "r1")
	problems, err := e.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "run r1") || !strings.Contains(problems[0], "input") {
		t.Fatalf("check after damaging the run's input: %q, want one problem naming run r1's input", problems)
	}

	flipFirstByte(t, path, "UPDATE flowlite_steps SET output = ? WHERE run_id = ?", "SELECT output FROM flowlite_steps WHERE run_id = ?", "r1")
	flipFirstByte(t, path, "UPDATE flowlite_signals SET payload = ? WHERE run_id = ?", "SELECT payload FROM flowlite_signals WHERE run_id = ?", "r2")
	problems, err = e.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"run r1: stored input", "run r1 step double#0: stored output", "run r2 signal late (id 1): stored payload"} {
		if !strings.Contains(joined, want) {
			t.Errorf("check does not report %q:\n%s", want, joined)
		}
	}
}

// TestOpenRefusesCorruptFile damages a b-tree page of a database file and
// expects Open, which used to accept it and write on, to refuse it with
// ErrCorrupt naming the file, without changing a byte of it.
func TestOpenRefusesCorruptFile(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e, err := flowsqlite.Open(ctx, path, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	flow.Register(e, twiceWF)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := flow.Start(ctx, e, twiceWF, 1, &flow.StartOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// The root page of an index the engine does not read at open: damage
	// there goes unnoticed until a query walks that index.
	db := rawDB(t, path)
	var page, pageSize int64
	if err := db.QueryRow("SELECT max(rootpage) FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").Scan(&page); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Byte 0 of a b-tree page is its type (2, 5, 10 or 13); 0 is none.
	if _, err := f.WriteAt([]byte{0}, (page-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before := sha256File(t, path)

	e, err = flowsqlite.Open(ctx, path, testConfig(), nil)
	if err == nil {
		e.Close()
		t.Fatal("Open accepted a database with a damaged page")
	}
	if !errors.Is(err, flow.ErrCorrupt) || !errors.Is(err, flow.ErrNotDatabase) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open of a damaged file: %v, want ErrCorrupt (and ErrNotDatabase) naming %s", err, path)
	}
	if sha256File(t, path) != before {
		t.Error("Open changed the damaged file")
	}

	// The check can be skipped for files known to be sound.
	e, err = flowsqlite.Open(ctx, path, nil, &flowsqlite.Options{SkipQuickCheck: true})
	if err != nil {
		t.Fatalf("Open with SkipQuickCheck: %v", err)
	}
	e.Close()
}

func sha256File(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

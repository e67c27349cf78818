// docs/postgresql.md: the tour's engine, opened by openShared on
// PostgreSQL, places an order as the SQLite one does. internal/readme's
// test copies this file next to the docs' code. It needs the server
// FLOWLITE_PG_DSN names (by default the local one), and skips without one
// unless FLOWLITE_PG_TEST=1.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

func TestTheProgramOnPostgreSQL(t *testing.T) {
	admin := os.Getenv("FLOWLITE_PG_DSN")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open(flowpg.DriverName, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // after the drop below
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv("FLOWLITE_PG_TEST") == "1" {
			t.Fatalf("FLOWLITE_PG_TEST=1 but no PostgreSQL server: %v", err)
		}
		t.Skipf("no PostgreSQL server: %v", err)
	}
	// A database of its own, as the program's would be.
	name := fmt.Sprintf("flowlite_readme_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	// The same server, in the database above: a URL gets it as its path, a
	// key=value DSN a later dbname, which overrides an earlier one.
	shared := admin + " dbname=" + name
	if u, err := url.Parse(admin); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		shared = u.String()
	}
	t.Setenv("DATABASE_URL", shared)

	eng, err := openShared(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	flow.Register(eng, placeOrder)
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	run, err := flow.Start(ctx, eng, placeOrder, order, &flow.StartOptions{Queue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := run.Result(ctx)
	if err != nil || receipt.Charge != "ch_"+order.ID {
		t.Fatalf("the order on PostgreSQL: %+v, %v; want charge ch_%s", receipt, err, order.ID)
	}
	// The run is recorded in the database every machine shares.
	sharedDB, err := sql.Open(flowpg.DriverName, shared)
	if err != nil {
		t.Fatal(err)
	}
	defer sharedDB.Close()
	var status string
	if err := sharedDB.QueryRowContext(ctx, "SELECT status FROM flowlite.runs WHERE id = $1", run.ID()).Scan(&status); err != nil || status != "completed" {
		t.Fatalf("run %s in the shared database: %q, %v; want completed", run.ID(), status, err)
	}
}

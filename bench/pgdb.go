package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshDatabase creates an empty database on the server of maint (a
// maintenance database's URL) and returns its URL and a function that drops
// it. Each system's run gets its own, so no system sees another's tables,
// dead tuples or autovacuum debt.
func freshDatabase(ctx context.Context, maint, system string) (dsn string, drop func(), err error) {
	u, err := url.Parse(maint)
	if err != nil {
		return "", nil, fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	name := fmt.Sprintf("flbench_%s_%d_%d", strings.ReplaceAll(system, "-", "_"), os.Getpid(), time.Now().UnixNano()%1e6)
	conn, err := pgx.Connect(ctx, maint)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", u.Host, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop = func() {
		// A fresh context: the scenario's may be cancelled already.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, maint)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: drop database %s: %v\n", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: drop database %s: %v\n", name, err)
		}
	}
	return u.String(), drop, nil
}

// pgCounter returns a function that runs query (a count) on dsn over one
// connection of its own; closeFn releases it.
func pgCounter(ctx context.Context, dsn, query string) (count func() (int, error), closeFn func(), err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	count = func() (int, error) {
		var n int
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
			return 0, fmt.Errorf("count finished: %w", err)
		}
		return n, nil
	}
	return count, func() { conn.Close(context.Background()) }, nil
}

// atLeast adapts a count to waitFor.
func atLeast(count func() (int, error), want int) func() (bool, error) {
	return func() (bool, error) {
		n, err := count()
		return n >= want, err
	}
}

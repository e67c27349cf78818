// Package netfault holds flowlite's network fault tests on PostgreSQL. It
// has no API: its test puts worker processes (this test binary, started
// again in worker mode) in network namespaces of their own, each linked to
// the test's namespace by a veth pair, so that every worker reaches the
// PostgreSQL server over a link of its own. The test cuts one worker's link
// and then another's, restores them, and checks every run against the
// database, an effects table the steps write in their own transaction, and
// an attempt ledger the workers append to (see netfault_test.go).
//
// It needs root, iproute2's ip, and a PostgreSQL server (internal/pgtest);
// it runs only with FLOWLITE_NETNS_TEST=1, and then fails rather than skips
// when any of them is missing. FLOWLITE_NETFAULT_DIR=dir keeps the
// workers' logs and the ledger in dir.
//
// Its tests import flow, flow/flowpg, internal/pgtest and pgx's
// database/sql driver (through flowpg) for the effects table.
package netfault

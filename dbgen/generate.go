// Package dbgen holds the sqlc output, one package per database engine.
// Nothing here is edited by hand: run `go generate ./dbgen` after changing
// db/queries or db/migrations. Only store adapters import these packages.
package dbgen

//go:generate sh -c "cd .. && go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1 generate"

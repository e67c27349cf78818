// Package migrations embeds the goose migrations, the one source of the
// database schema, one tree per dialect. It imports nothing from the
// project.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var embedded embed.FS

// SQLite returns the SQLite migrations as a file system rooted at their folder.
func SQLite() fs.FS { return sub("sqlite") }

// Postgres returns the PostgreSQL migrations as a file system rooted at
// their folder. They create flowlite's objects in the schema PostgresSchema,
// naming it in every statement; a store kept in another schema rewrites
// that qualifier (see internal/store/pgstore).
func Postgres() fs.FS { return sub("postgres") }

// PostgresSchema is the schema the PostgreSQL migrations and queries name.
const PostgresSchema = "flowlite"

func sub(dir string) fs.FS {
	s, err := fs.Sub(embedded, dir)
	if err != nil {
		// fs.Sub fails only on an invalid path, and dir is valid.
		panic(err)
	}
	return s
}

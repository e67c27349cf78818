// Package migrations embeds the goose migrations, the one source of the
// database schema. It imports nothing from the project.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql
var embedded embed.FS

// SQLite returns the SQLite migrations as a file system rooted at their folder.
func SQLite() fs.FS {
	sub, err := fs.Sub(embedded, "sqlite")
	if err != nil {
		// fs.Sub fails only on an invalid path, and "sqlite" is valid.
		panic(err)
	}
	return sub
}

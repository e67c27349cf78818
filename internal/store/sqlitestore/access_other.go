//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sqlitestore

// dirWritable assumes a directory is writable where access(2) is not
// available; SQLite then reports the problem when it creates the WAL.
func dirWritable(string) bool { return true }

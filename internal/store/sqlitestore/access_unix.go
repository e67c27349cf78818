//go:build linux || darwin || freebsd || netbsd || openbsd

package sqlitestore

import "syscall"

// dirWritable reports whether this process may create files in dir, as
// access(2) judges it: it accounts for the file mode, the user (root may
// write anywhere) and a file system mounted read-only (EROFS, even for
// root). SQLite creates the -wal and -shm files of a WAL database there.
func dirWritable(dir string) bool {
	const wOK = 0x2 // W_OK
	return syscall.Access(dir, wOK) == nil
}

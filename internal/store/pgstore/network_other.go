//go:build !linux

package pgstore

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is Linux's alone:
// keepalive still notices a dead idle connection, and busy ones fail when
// the kernel gives up retransmitting.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }

package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestProcessCPU burns CPU until the kernel's own account of it
// (getrusage) has grown by 200 ms: /proc's clock ticks must show as much,
// give or take a tick or two. Both count CPU time, not the wall clock, so
// a busy machine does not change the outcome.
func TestProcessCPU(t *testing.T) {
	rusageCPU := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, ruBefore := processCPU(os.Getpid()), rusageCPU()
	for rusageCPU()-ruBefore < 200*time.Millisecond {
	}
	used, ruUsed := processCPU(os.Getpid())-before, rusageCPU()-ruBefore
	if d := used - ruUsed; d < -3*clockTick || d > 3*clockTick {
		t.Fatalf("getrusage shows %v of CPU used, /proc %v", ruUsed, used)
	}
	st, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid %d, want %d", st.ppid, os.Getppid())
	}
}

// TestServerCPU finds the local PostgreSQL server the suite runs against,
// and its CPU time only grows.
func TestServerCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a local PostgreSQL server")
	}
	first, ok := serverCPU()
	if !ok {
		t.Fatal("no postgres process with a parent that is not one: is PostgreSQL running here?")
	}
	if second, _ := serverCPU(); second < first {
		t.Errorf("server CPU went from %v to %v", first, second)
	}
}

package main

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPU reads this process's CPU time before and after it burns
// 100 ms of it: /proc's clock ticks must show at least most of that.
func TestProcessCPU(t *testing.T) {
	before := processCPU(os.Getpid())
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	if used := processCPU(os.Getpid()) - before; used < 50*time.Millisecond {
		t.Fatalf("burned 100 ms of CPU, /proc shows %v", used)
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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of the CPU times in /proc/*/stat:
// 100 on every architecture Linux runs on (sysconf needs cgo to ask).
const clockTick = 10 * time.Millisecond

// procStat is the part of /proc/<pid>/stat the CPU figures need.
type procStat struct {
	comm     string
	ppid     int
	cpu      time.Duration // user + system time of the process itself
	children time.Duration // user + system time of its exited, waited-for children
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold spaces or
	// parentheses itself: the fields that follow start after the last ')'.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: no command name in %q", pid, s)
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 of proc(5), the state
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var n [5]int64
	for i, field := range []int{4, 14, 15, 16, 17} { // ppid, utime, stime, cutime, cstime
		if n[i], err = strconv.ParseInt(f[field-3], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("read /proc/%d/stat field %d: %w", pid, field, err)
		}
	}
	return procStat{
		comm:     s[open+1 : end],
		ppid:     int(n[0]),
		cpu:      time.Duration(n[1]+n[2]) * clockTick,
		children: time.Duration(n[3]+n[4]) * clockTick,
	}, nil
}

// serverCPU is the CPU time the local PostgreSQL server has used so far:
// that of every live postgres process, plus that of the backends that
// exited, which the postmaster (a postgres process whose parent is not
// one) has waited for. The difference of two readings is what the server
// did in between, even across backends that came and went. ok is false
// when there is no /proc or no local server, as with a remote one.
func serverCPU() (total time.Duration, ok bool) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, false
	}
	stats := map[int]procStat{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.comm == "postgres" {
			stats[pid] = st
		}
	}
	for _, st := range stats {
		total += st.cpu
		if _, parentIsServer := stats[st.ppid]; !parentIsServer {
			total += st.children
			ok = true
		}
	}
	return total, ok
}

// processCPU is the CPU time process pid has used so far (0 if it cannot
// be read).
func processCPU(pid int) time.Duration {
	st, err := readProcStat(pid)
	if err != nil {
		return 0
	}
	return st.cpu
}

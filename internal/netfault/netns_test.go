//go:build linux

package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Every namespace and veth the test creates starts with namePrefix, so that
// the leftovers of a run that crashed (or was killed by go test's timeout)
// can be found and deleted by the next one.
const namePrefix = "flnf"

// host is one worker's network: a namespace holding the worker's end of a
// veth pair, whose other end stays in the test's namespace, and a forwarder
// on that other end's address.
type host struct {
	i          int
	ns         string // network namespace
	hostIf     string // veth end in the test's namespace
	workerIf   string // veth end in ns
	hostAddr   string // address of hostIf, which the worker connects to
	workerAddr string
	fwd        *forwarder
}

// ip runs iproute2's ip and returns its combined output in the error.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockMachine takes a lock that one run of this test on a machine holds,
// so that deleting the leftovers of earlier runs by name never deletes the
// namespaces of one that is running.
func lockMachine(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "flowlite-netfault.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("open the machine lock: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("lock %s (another run of this test holds it?): %v", f.Name(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// removeLeftovers deletes the namespaces and veths of earlier runs, with the
// worker processes still in those namespaces (a run killed by a timeout
// leaves them behind).
func removeLeftovers(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, namePrefix) {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", name).Output()
		for _, p := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if err := ip("netns", "del", name); err != nil {
			t.Fatalf("delete a leftover namespace: %v", err)
		}
		t.Logf("deleted the leftover namespace %s", name)
	}
	links, err := net.Interfaces()
	if err != nil {
		t.Fatalf("list interfaces: %v", err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Name, namePrefix) {
			if _, err := net.InterfaceByName(l.Name); err != nil {
				continue // the peer of a veth deleted before it
			}
			if err := ip("link", "del", l.Name); err != nil {
				t.Fatalf("delete a leftover veth: %v", err)
			}
			t.Logf("deleted the leftover veth %s", l.Name)
		}
	}
}

// newHost creates namespace i with its veth pair and addresses, and a
// forwarder from the host side to upstream. Cleanup deletes them all.
func newHost(t *testing.T, i int, upstream string) *host {
	t.Helper()
	h := &host{
		i:          i,
		ns:         fmt.Sprintf("%s-w%d", namePrefix, i),
		hostIf:     fmt.Sprintf("%s%dh", namePrefix, i),
		workerIf:   fmt.Sprintf("%s%dw", namePrefix, i),
		hostAddr:   fmt.Sprintf("10.77.%d.1", i),
		workerAddr: fmt.Sprintf("10.77.%d.2", i),
	}
	if err := ip("netns", "add", h.ns); err != nil {
		t.Fatalf("network namespaces unavailable: %v", err)
	}
	t.Cleanup(func() {
		// Deleting the namespace deletes the veth end in it, and with it
		// the pair.
		if err := ip("netns", "del", h.ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	steps := [][]string{
		{"link", "add", h.hostIf, "type", "veth", "peer", "name", h.workerIf},
		{"link", "set", h.workerIf, "netns", h.ns},
		{"addr", "add", h.hostAddr + "/24", "dev", h.hostIf},
		{"link", "set", h.hostIf, "up"},
		{"-n", h.ns, "addr", "add", h.workerAddr + "/24", "dev", h.workerIf},
		{"-n", h.ns, "link", "set", h.workerIf, "up"},
		{"-n", h.ns, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			t.Fatalf("set up the network of worker %d: %v", i, err)
		}
	}
	fwd, err := newForwarder(h.hostAddr+":0", upstream)
	if err != nil {
		t.Fatalf("forwarder of worker %d: %v", i, err)
	}
	t.Cleanup(fwd.close)
	h.fwd = fwd
	return h
}

// How a link is cut.
type cutKind string

const (
	// cutSilent downs the test's end of the veth pair: the worker's end
	// stays up with its route, and everything it sends vanishes without an
	// error, as when a cable or switch between two machines fails.
	// Established TCP connections hang: the worker's kernel retransmits
	// into the void, and the forwarder (like a server) hears nothing.
	cutSilent cutKind = "silent drop (host end of the veth down)"
	// cutLocal downs the worker's own end: its route to the server
	// disappears, so new connections fail at once (network unreachable),
	// while established ones hang as above.
	cutLocal cutKind = "local link down (worker end of the veth down)"
)

func (h *host) setLink(kind cutKind, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if kind == cutSilent {
		return ip("link", "set", h.hostIf, state)
	}
	return ip("-n", h.ns, "link", "set", h.workerIf, state)
}

// forwarder relays TCP connections from the worker side of a veth to the
// PostgreSQL server.
//
// It exists because the server listens only on 127.0.0.1 of the test's
// namespace, and a worker in a namespace of its own has a loopback of its
// own: it cannot reach that address, and the server's configuration is not
// the test's to change. So the worker connects to the forwarder on the
// host end of its veth, and its packets to the server cross the link the
// test cuts; the forwarder's own connection to the server, over loopback,
// is never cut.
//
// The forwarder stands for the server's end of the network. It keeps a
// relayed pair open until one side closes or fails, and it sets no TCP
// keepalive on the worker's side, as a server with the default settings
// (keepalive after two hours) would not: a worker that vanishes leaves its
// session, and any transaction it had open with the row locks taken, on
// the server until something other than TCP ends it. What the worker sees
// is what it would see from a real server across a real network: silence
// while the link is cut, and a reset for a connection the server side
// ended meanwhile once the link is back.
type forwarder struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newForwarder(listen, upstream string) (*forwarder, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	f := &forwarder{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// addr is where workers connect.
func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		down, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		up, err := net.DialTimeout("tcp", f.upstream, 5*time.Second)
		if err != nil {
			down.Close()
			continue
		}
		if !f.track(down, up) {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relay(down, up)
		}()
	}
}

func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

// relay copies both ways until either direction ends, then closes both
// connections: the pair is one connection as far as its ends know.
func (f *forwarder) relay(down, up net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, down)
	go cp(down, up)
	<-done
	down.Close()
	up.Close()
	<-done
	f.mu.Lock()
	delete(f.conns, down)
	delete(f.conns, up)
	f.mu.Unlock()
}

func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}

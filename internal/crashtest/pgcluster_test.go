package crashtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Throw-away PostgreSQL clusters for the failover tests (failover_test.go):
// a primary made with initdb and a streaming standby made from it with
// pg_basebackup, in a directory of their own, on ports of their own, run
// with the Debian binaries of the highest version in /etc/postgresql.
// They never touch the shared server on port 5432. initdb refuses to run
// as root, so as root (CI) every tool runs as the postgres user through
// runuser, in a directory owned by it.

// pgBin returns the directory of the binaries of the highest PostgreSQL
// version installed, or why there is none.
func pgBin() (string, error) {
	entries, err := os.ReadDir("/etc/postgresql")
	if err != nil {
		return "", fmt.Errorf("no PostgreSQL installed: %w", err)
	}
	var versions []int
	for _, e := range entries {
		if v, err := strconv.Atoi(e.Name()); err == nil {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("no PostgreSQL version in /etc/postgresql")
	}
	bin := fmt.Sprintf("/usr/lib/postgresql/%d/bin", slices.Max(versions))
	for _, tool := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			return "", fmt.Errorf("missing %s: %w", tool, err)
		}
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return "", fmt.Errorf("running as root needs runuser to run PostgreSQL as postgres: %w", err)
		}
		if _, err := user.Lookup("postgres"); err != nil {
			return "", fmt.Errorf("running as root needs a postgres user: %w", err)
		}
	}
	return bin, nil
}

// pgNode is one cluster: its data directory and port.
type pgNode struct {
	name string
	bin  string
	root string // the test's directory, which holds the socket too
	data string
	port int
}

func (n *pgNode) log() string { return filepath.Join(n.root, n.name+".log") }

// dsn reaches this node alone.
func (n *pgNode) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", n.port)
}

// tool runs one PostgreSQL binary, as postgres when this process is root.
func (n *pgNode) tool(name string, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(n.bin, name)}, args...)
	if os.Geteuid() == 0 {
		argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	// pg_ctl start sends the server's output to its log file, so the
	// server does not hold the pipe CombinedOutput reads to its end.
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// appendConf appends lines to a configuration file of the node, owned by
// postgres when this process is root.
func (n *pgNode) appendConf(file string, lines ...string) error {
	path := filepath.Join(n.data, file)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return chownPostgres(path)
}

// start starts the node and waits until it accepts connections (a
// standby: once it is consistent).
func (n *pgNode) start() error {
	closeInheritable()
	_, err := n.tool("pg_ctl", "-D", n.data, "-w", "-t", "60", "-l", n.log(),
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", n.port, n.root), "start")
	if err != nil {
		return fmt.Errorf("start %s: %w (log: %s)", n.name, err, tail(n.log(), 2000))
	}
	return nil
}

// stop stops the node at once (for the cleanup); an error when it is not
// running is ignored.
func (n *pgNode) stop() {
	_, _ = n.tool("pg_ctl", "-D", n.data, "-m", "immediate", "-w", "-t", "20", "stop")
}

// postmasterPID is the first line of postmaster.pid.
func (n *pgNode) postmasterPID() (int, error) {
	f, err := os.Open(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("empty postmaster.pid of %s", n.name)
	}
	return strconv.Atoi(strings.TrimSpace(sc.Text()))
}

// processes returns the pids of the node's processes: the postmaster
// and its children, which all run in the data directory.
func (n *pgNode) processes() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if cwd, err := os.Readlink(p); err == nil && cwd == n.data {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// kill SIGKILLs the node's postmaster as a machine that dies would end
// it: every process of the cluster is stopped (SIGSTOP) first, so that
// none sends a byte more, to the clients or to the standby, then all are
// SIGKILLed, the postmaster (the first line of postmaster.pid) first. A
// SIGKILL of the postmaster alone leaves its backends running until they
// notice, committing and streaming meanwhile, which no dead machine does.
func (n *pgNode) kill() error {
	pid, err := n.postmasterPID()
	if err != nil {
		return fmt.Errorf("kill %s: %w", n.name, err)
	}
	others := n.processes()
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for _, p := range others {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", n.name, pid, err)
	}
	for _, p := range others {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return nil
}

// gone waits until no process of the node's cluster is left, so that its
// data directory can be started again.
func (n *pgNode) gone(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		alive := len(n.processes())
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of %s still running %s after its postmaster died", alive, n.name, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promote makes a standby the primary and waits until it is.
func (n *pgNode) promote() error {
	_, err := n.tool("pg_ctl", "-D", n.data, "-w", "-t", "60", "promote")
	return err
}

// chownPostgres gives path to the postgres user when this process is root.
func chownPostgres(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

// closeInheritable marks this process's descriptors above stderr
// close-on-exec, so that a server started from it holds none of them
// (see pgCtl).
func closeInheritable() {
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, f := range fds {
			if fd, err := strconv.Atoi(f.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	}
}

// freePorts returns n ports on 127.0.0.1 nothing listens on, from 5441
// up (above the ones CI's other steps use: 5432, 5434, 6432, 6433), and
// none of avoid.
func freePorts(t *testing.T, n int, avoid ...int) []int {
	t.Helper()
	var ports []int
	for p := 5441; p < 5600 && len(ports) < n; p++ {
		if slices.Contains(avoid, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("found %d free ports from 5441, want %d", len(ports), n)
	}
	return ports
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// pgPair is a primary and its streaming standby.
type pgPair struct {
	root             string
	primary, standby *pgNode
	sync             bool
}

// newPGPair makes a primary and a standby from it in a fresh directory
// (removed when the test ends, with both servers stopped) and starts
// both. With sync, the primary waits for the standby to flush every
// commit before it acknowledges it (synchronous_standby_names = '*',
// synchronous_commit = on); without, the standby streams behind.
func newPGPair(t *testing.T, sync bool) *pgPair {
	t.Helper()
	bin, err := pgBin()
	if err != nil {
		t.Fatalf("%s=1 but %v", envFailover, err)
	}
	// Not t.TempDir: its parents are private to root, and postgres must
	// reach the data directories.
	root, err := os.MkdirTemp("", "flowlite-failover-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chownPostgres(root); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	p := &pgPair{
		root: root, sync: sync,
		primary: &pgNode{name: "primary", bin: bin, root: root, data: filepath.Join(root, "primary"), port: ports[0]},
		standby: &pgNode{name: "standby", bin: bin, root: root, data: filepath.Join(root, "standby"), port: ports[1]},
	}
	t.Cleanup(func() {
		p.standby.stop()
		p.primary.stop()
		if pid, err := p.primary.postmasterPID(); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !t.Failed() || os.Getenv("FLOWLITE_PG_FAILOVER_KEEP") == "" {
			os.RemoveAll(root)
		} else {
			t.Logf("clusters kept in %s", root)
		}
	})
	// A test that runs into go test's -timeout panics without cleanups:
	// stop the servers a little before, so that none outlives the test.
	if d, ok := t.Deadline(); ok {
		watchdog := time.AfterFunc(time.Until(d)-15*time.Second, func() {
			p.standby.stop()
			p.primary.stop()
		})
		t.Cleanup(func() { watchdog.Stop() })
	}
	if _, err := p.primary.tool("initdb", "-D", p.primary.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatal(err)
	}
	names := "''"
	if sync {
		names = "'*'"
	}
	if err := p.primary.appendConf("postgresql.conf",
		"wal_level = replica", "max_wal_senders = 4", "hot_standby = on", "wal_keep_size = '256MB'",
		"max_connections = 80", "synchronous_commit = on", "synchronous_standby_names = "+names,
		"fsync = on", "full_page_writes = on", "shared_buffers = '32MB'",
	); err != nil {
		t.Fatal(err)
	}
	if err := p.primary.appendConf("pg_hba.conf", "host replication all 127.0.0.1/32 trust"); err != nil {
		t.Fatal(err)
	}
	if err := p.primary.start(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.standby.tool("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primary.port), "-U", "postgres",
		"-D", p.standby.data, "-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatal(err)
	}
	// The standby's own settings come after the ones pg_basebackup copied:
	// an application_name for pg_stat_replication, and no synchronous
	// standby of its own, or the promoted standby would wait for one that
	// does not exist on every commit.
	if err := p.standby.appendConf("postgresql.auto.conf",
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=standby1'", p.primary.port),
		"synchronous_standby_names = ''",
		// A receiver that lost its primary retries after this long, and
		// a promotion requested meanwhile could wait for the retry (5s
		// by default): the failover time measured is the engines', not
		// the standby's retry timer.
		"wal_retrieve_retry_interval = '100ms'",
	); err != nil {
		t.Fatal(err)
	}
	if err := p.standby.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

package main

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// enqueueKeyed works one send_mail run to its end under the queue's
// limits, then adds a run id with concurrency key key, which the rate
// limit the test set holds back.
func enqueueKeyed(t *testing.T, path, id, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 5 * time.Millisecond, Queues: map[string]flow.QueueConfig{"mail": {Concurrency: 4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, sendMail)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := flow.Enqueue(ctx, e, sendMail, "first@example.com", &flow.EnqueueOptions{RunID: id + "-first", ConcurrencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("first run: %v", err)
	}
	if _, err := flow.Enqueue(ctx, e, sendMail, "x@example.com", &flow.EnqueueOptions{RunID: id, ConcurrencyKey: key}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // some polls, which the rate limit refuses
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestQueuesLimit(t *testing.T) {
	t.Parallel()
	path := jobFixture(t)

	if out := ok(t, path, "queues"); strings.Contains(out, "CONCURRENCY") {
		t.Errorf("queues shows a limits table with no limits:\n%s", out)
	}
	out := ok(t, path, "queues", "limit", "mail", "--concurrency", "5", "--rate", "1/1h", "--key-concurrency", "2",
		"--key", "tenant:big=10,weight=3,rate=50/1s", "--key", "tenant:small=1")
	if !strings.HasPrefix(out, "queue mail limited: concurrency 5, rate 1/1h0m0s") {
		t.Errorf("limit: %q", out)
	}
	enqueueKeyed(t, path, "keyed-1", "tenant:big:1")

	out = ok(t, path, "queues")
	row := rowOf(t, out[strings.Index(out, "CONCURRENCY"):], "mail")
	want := []string{"mail", "5", "1/1h0m0s", "2", "-", "tenant:big=10,weight=3,rate=50/1s", "tenant:small=1", "0", "1"}
	if !slices.Equal(row[:len(want)], want) || row[len(row)-2] != "1" || row[len(row)-1] != "1" {
		t.Errorf("queues limits row: %q, want %q … READY 1 HELD 1\n%s", row, want, out)
	}
	qs := decode[[]queueJSON](t, ok(t, path, "queues", "--json"))
	i := slices.IndexFunc(qs, func(q queueJSON) bool { return q.Queue == "mail" })
	if i < 0 || qs[i].Limits == nil || qs[i].Limits.Limits.Concurrency != 5 || qs[i].Limits.Limits.Rate != (flow.RateLimit{Limit: 1, Period: time.Hour}) ||
		len(qs[i].Limits.Limits.Keys) != 2 || qs[i].Limits.Ready != 1 || qs[i].Limits.HeldBack != 1 || qs[i].Limits.Started < 1 {
		t.Errorf("queues --json limits: %+v", qs)
	}
	if j := slices.IndexFunc(qs, func(q queueJSON) bool { return q.Queue == "batch" }); j < 0 || qs[j].Limits != nil {
		t.Errorf("queues --json gives batch limits: %+v", qs)
	}

	show := ok(t, path, "show", "keyed-1")
	if got := rowOf(t, show, "Concurrency"); strings.Join(got, " ") != "Concurrency key tenant:big:1" {
		t.Errorf("show concurrency key: %q", got)
	}
	if got := strings.Join(rowOf(t, show, "Held"), " "); !strings.Contains(got, "held by") || !strings.Contains(got, "queue mail") {
		t.Errorf("show held back: %q\n%s", got, show)
	}
	d := decode[runDetailJSON](t, ok(t, path, "show", "--json", "keyed-1"))
	if d.ConcurrencyKey != "tenant:big:1" || !strings.HasPrefix(d.HeldBy, "held by") {
		t.Errorf("show --json: key %q, held by %q", d.ConcurrencyKey, d.HeldBy)
	}

	limitsOf := func() *limitUseJSON {
		qs := decode[[]queueJSON](t, ok(t, path, "queues", "--json"))
		return qs[slices.IndexFunc(qs, func(q queueJSON) bool { return q.Queue == "mail" })].Limits
	}
	before := limitsOf()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "100"}, `--rate: rate "100"`},
		{[]string{"--rate", "0/1s"}, `--rate: rate "0/1s"`},
		{[]string{"--rate", "5/soon"}, `--rate: rate "5/soon"`},
		{[]string{"--key-rate", "5/0s"}, `--key-rate: rate "5/0s"`},
		{[]string{"--concurrency", "-1"}, "--concurrency -1"},
		{[]string{"--concurrency", "x"}, `invalid argument "x"`},
		{[]string{"--key", "tenant"}, `--key: key limit "tenant": no concurrency`},
		{[]string{"--key", "=3"}, `--key: key limit "=3": empty prefix`},
		{[]string{"--key", "t=3,weight=0"}, `--key: key limit "t=3,weight=0": weight "0"`},
		{[]string{"--key", "t=3,size=2"}, `unknown field "size=2"`},
		{[]string{"--key", "t=3,rate=9"}, `key limit "t=3,rate=9": rate "9"`},
		{[]string{"--clear", "--concurrency", "3"}, "--clear takes no other limit flag"},
		{nil, "no limit given"},
	} {
		fails(t, exitUsage, tt.want, append([]string{"--db", path, "queues", "limit", "mail"}, tt.args...)...)
	}
	fails(t, exitUsage, "expected one queue name", "--db", path, "queues", "limit", "--concurrency", "3")
	if after := limitsOf(); !reflect.DeepEqual(after, before) {
		t.Errorf("a refused limit changed the limits: %+v, was %+v", after, before)
	}

	if out := ok(t, path, "queues", "limit", "mail", "--clear"); out != "queue mail limits cleared\n" {
		t.Errorf("clear: %q", out)
	}
	if out := ok(t, path, "queues"); strings.Contains(out, "CONCURRENCY") {
		t.Errorf("queues shows limits after --clear:\n%s", out)
	}
	if got := rowOf(t, ok(t, path, "show", "keyed-1"), "Concurrency"); len(got) != 3 {
		t.Errorf("show after clear: %q", got)
	}
	if strings.Contains(ok(t, path, "show", "keyed-1"), "Held back") {
		t.Errorf("show says held back with no limits")
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// mailDead is how many dead letters jobFixture adds, in queue "mail".
const mailDead = 7

var sendMail = flow.Job[string]{
	Name:  "send_mail",
	Queue: "mail",
	Handler: func(_ context.Context, to string) error {
		return flow.Permanent(fmt.Errorf("mailbox %s full", to))
	},
}

// jobFixture is fixture plus mailDead failed send_mail jobs.
func jobFixture(t *testing.T) string {
	t.Helper()
	path := fixtureDB(t)
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
	for i := range mailDead {
		run, err := flow.Enqueue(ctx, e, sendMail, fmt.Sprintf("user%d@example.com", i), &flow.EnqueueOptions{RunID: fmt.Sprintf("mail-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
			t.Fatalf("mail job %d: %v", i, err)
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return path
}

func deadIDs(t *testing.T, path string, args ...string) []string {
	t.Helper()
	var ids []string
	for _, r := range decode[[]deadJSON](t, ok(t, path, append([]string{"dead", "list", "--json"}, args...)...)) {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestRetry(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	out := ok(t, path, "retry", sagaRun)
	if out != "run saga-1 requeued as saga-1/requeue-1 (pending): an engine working queue \"default\" takes it up within its poll interval\n" {
		t.Errorf("retry: %q", out)
	}
	if got := decode[runDetailJSON](t, ok(t, path, "show", "--json", "saga-1/requeue-1")); got.Status != flow.StatusPending || got.Workflow != "pay_order" || got.Version != 2 {
		t.Errorf("requeued run: %+v", got)
	}

	for id, want := range map[string]string{
		sagaRun:    "run saga-1 was requeued already, as saga-1/requeue-1",
		doneRun:    "run done-1 is completed, not failed",
		stuckRun:   "run stuck-1 is suspended, not failed: resume, skip or cancel it instead",
		pendingRun: "run pending-1 is pending, not failed",
		"nope":     "run nope: not found",
	} {
		before := ok(t, path, "runs", "--json")
		fails(t, exitError, want, "--db", path, "retry", id)
		if after := ok(t, path, "runs", "--json"); after != before {
			t.Errorf("a refused retry of %s changed the runs", id)
		}
	}
	fails(t, exitUsage, "missing run ID", "--db", path, "retry")
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	path := jobFixture(t)

	all := deadIDs(t, path)
	if len(all) != mailDead+1 || !slices.Contains(all, sagaRun) {
		t.Fatalf("dead list: %q", all)
	}
	if got := deadIDs(t, path, "--queue", "mail"); len(got) != mailDead || slices.Contains(got, sagaRun) {
		t.Errorf("dead list --queue mail: %q", got)
	}
	if got := deadIDs(t, path, "--workflow", "pay_order"); !slices.Equal(got, []string{sagaRun}) {
		t.Errorf("dead list --workflow pay_order: %q", got)
	}
	if got := deadIDs(t, path, "--limit", "2", "--since", "1h"); len(got) != 2 {
		t.Errorf("dead list --limit 2: %q", got)
	}
	if got := deadIDs(t, path, "--until", "1h"); len(got) != 0 {
		t.Errorf("dead list --until 1h: %q", got)
	}
	out := ok(t, path, "dead", "list", "--queue", "mail")
	if row := strings.Join(rowOf(t, out, "mail-3"), " "); !strings.Contains(row, "send_mail(v1) mail") || !strings.Contains(row, "mailbox user3@example.com full") {
		t.Errorf("dead list row: %s", row)
	}

	before := ok(t, path, "runs", "--json")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dead", "requeue"}, "requeue which dead letters?"},
		{[]string{"dead", "purge"}, "purge which dead letters?"},
		{[]string{"dead", "purge", "mail-1", "--all"}, "run IDs or filters, not both"},
		{[]string{"dead", "purge", "mail-1", "--queue", "mail"}, "run IDs or filters, not both"},
		{[]string{"dead", "purge", ""}, "empty run ID"},
		{[]string{"dead", "requeue", "mail-1", "--queue", "mail"}, "run IDs or filters, not both"},
		{[]string{"dead", "requeue", "--queue", "mail", "--batch", "0"}, "invalid --batch 0"},
		{[]string{"dead", "list", "--since", "lately"}, `invalid --since "lately"`},
		{[]string{"dead", "list", "--limit", "0"}, "invalid --limit 0"},
		{[]string{"dead"}, "missing subcommand"},
		{[]string{"dead", "bury"}, `unknown command "bury"`},
	} {
		fails(t, exitUsage, tt.want, append([]string{"--db", path}, tt.args...)...)
	}
	if out := ok(t, path, "dead", "requeue", "--queue", "mail", "--dry-run"); out != "would requeue 7 dead letter(s)\n" {
		t.Errorf("dry run: %q", out)
	}
	if out := ok(t, path, "dead", "purge", "--all", "--dry-run"); out != "would purge 8 dead letter(s)\n" {
		t.Errorf("dry run: %q", out)
	}
	if after := ok(t, path, "runs", "--json"); after != before {
		t.Errorf("usage errors or dry runs changed the runs")
	}

	// Purge one workflow's; requeue a queue's in steps of 3, with progress.
	res := decode[bulkJSON](t, ok(t, path, "dead", "purge", "--json", "--workflow", "pay_order"))
	if res.Matched != 1 || res.Done != 1 || res.Action != "purge" {
		t.Errorf("purge: %+v", res)
	}
	fails(t, exitError, "run saga-1: not found", "--db", path, "show", sagaRun)

	r := flowlite(t, map[string]string{envProgress: "always"}, "--db", path, "dead", "requeue", "--queue", "mail", "--batch", "3")
	if r.code != exitOK || r.stdout != "requeued 7 of 7 dead letter(s)\n" {
		t.Fatalf("requeue: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "requeue dead letters… 7/7 (100%)") || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("requeue progress: %q", r.stderr)
	}
	if got := deadIDs(t, path); len(got) != 0 {
		t.Errorf("dead letters left: %q", got)
	}
	if runs := decode[[]runJSON](t, ok(t, path, "runs", "--json", "--queue", "mail", "--status", "pending")); len(runs) != mailDead {
		t.Errorf("requeued runs pending in mail: %d", len(runs))
	}
	if out := ok(t, path, "dead", "requeue", "--all"); out != "requeued 0 of 0 dead letter(s)\n" {
		t.Errorf("requeue with none left: %q", out)
	}

	// Requeue by ID, several at once.
	path2 := jobFixture(t)
	reqs := decode[[]requeueJSON](t, ok(t, path2, "dead", "requeue", "--json", "mail-1", "mail-2"))
	if len(reqs) != 2 || reqs[0].NewRun != "mail-1/requeue-1" || reqs[1].NewRun != "mail-2/requeue-1" {
		t.Errorf("dead requeue IDs: %+v", reqs)
	}
	// It stops at the first refusal, after saying what it did.
	r = flowlite(t, nil, "--db", path2, "dead", "requeue", "mail-3", doneRun, "mail-4")
	if r.code != exitError || !strings.HasPrefix(r.stdout, "run mail-3 requeued as mail-3/requeue-1") ||
		!strings.Contains(r.stderr, "run done-1 is completed, not failed") {
		t.Errorf("requeue stopping at done-1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := deadIDs(t, path2, "--queue", "mail"); slices.Contains(got, "mail-3") || !slices.Contains(got, "mail-4") {
		t.Errorf("after a requeue that stopped at done-1: %q", got)
	}

	// Purge by ID: all named runs or none.
	for _, tt := range []struct {
		ids  []string
		want string
	}{
		{[]string{"mail-4", "nope"}, "run nope: not found"},
		{[]string{"mail-4", doneRun}, "run done-1: state conflict: it is completed, not failed"},
		{[]string{"mail-4", "mail-3"}, "run mail-3: state conflict: it was requeued as mail-3/requeue-1"},
		{[]string{stuckRun}, "run stuck-1: state conflict: it is suspended, not failed"},
	} {
		before := ok(t, path2, "runs", "--json")
		fails(t, exitError, tt.want, append([]string{"--db", path2, "dead", "purge"}, tt.ids...)...)
		if after := ok(t, path2, "runs", "--json"); after != before {
			t.Errorf("a refused purge of %q changed the runs", tt.ids)
		}
	}
	res = decode[bulkJSON](t, ok(t, path2, "dead", "purge", "--json", "mail-4", "mail-5", "mail-4"))
	if res.Action != "purge" || res.Matched != 2 || res.Done != 2 {
		t.Errorf("purge by IDs: %+v", res)
	}
	for _, id := range []string{"mail-4", "mail-5"} {
		fails(t, exitError, "run "+id+": not found", "--db", path2, "history", id)
	}
	if got := deadIDs(t, path2, "--queue", "mail"); !slices.Contains(got, "mail-6") || slices.Contains(got, "mail-4") {
		t.Errorf("dead letters after purging mail-4 and mail-5: %q", got)
	}
	if out := ok(t, path2, "dead", "purge", "mail-6"); out != "purged 1 dead letter(s): mail-6\n" {
		t.Errorf("purge one: %q", out)
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()
	path := jobFixture(t)

	out := ok(t, path, "queues")
	if got := rowOf(t, out, "mail"); got[1] != "active" || got[8] != "7" {
		t.Errorf("queues mail row: %q", got)
	}
	if got := rowOf(t, out, "batch"); got[2] != "1" {
		t.Errorf("queues batch row: %q", got)
	}

	if out := ok(t, path, "queues", "pause", "mail"); !strings.HasPrefix(out, "queue mail paused") {
		t.Errorf("pause: %q", out)
	}
	qs := decode[[]queueJSON](t, ok(t, path, "queues", "--json"))
	i := slices.IndexFunc(qs, func(q queueJSON) bool { return q.Queue == "mail" })
	if i < 0 || !qs[i].Paused || qs[i].DeadLetters != mailDead || qs[i].Runs[flow.StatusFailed] != mailDead {
		t.Errorf("queues --json after pause: %+v", qs)
	}
	if rowOf(t, ok(t, path, "queues"), "mail")[1] != "paused" {
		t.Errorf("queues does not show the pause")
	}
	ok(t, path, "queues", "resume", "mail")
	if rowOf(t, ok(t, path, "queues"), "mail")[1] != "active" {
		t.Errorf("queues does not show the resume")
	}
	fails(t, exitUsage, "expected one queue name", "--db", path, "queues", "pause")
	fails(t, exitUsage, "empty queue name", "--db", path, "queues", "resume", "")
	fails(t, exitUsage, `unknown command "drain"`, "--db", path, "queues", "drain")
}

package dashboard

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// The pages and actions of the job queue: queue statistics with pause and
// resume, dead letters with requeue (one or all matching) and purge.

// queueRow is one queue on the overview.
type queueRow struct {
	flow.QueueStats
	Running int64 // running and compensating
}

// N returns the queue's runs in state st.
func (q queueRow) N(st string) int64 { return q.Counts[flow.RunStatus(st)] }

func (d *Dashboard) queueRows(ctx context.Context) ([]queueRow, error) {
	stats, err := d.e.QueueStats(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]queueRow, len(stats))
	for i, s := range stats {
		rows[i] = queueRow{QueueStats: s, Running: s.Counts[flow.StatusRunning] + s.Counts[flow.StatusCompensating]}
	}
	return rows, nil
}

func (d *Dashboard) jobActions() []action {
	return []action{{
		Name: "retry", Label: "Retry", Confirm: "Retry this failed run?",
		Explain: "The dead letter is started again from scratch as a new run (its ID plus /requeue-N) with the same workflow version, queue, priority and input. The failed run keeps its steps and history, linked to the new one. An engine working its queue takes the new run within its poll interval.",
		Done:    "Requeued: this is the new run.",
		applies: func(r flow.RunInfo) bool { return r.Status == flow.StatusFailed && r.RequeuedAs == "" },
		do:      func(ctx context.Context, e *flow.Engine, id string) (string, error) { return e.Requeue(ctx, id) },
	}, {
		Name: "run-now", Label: "Run now", Confirm: "Run this run now?",
		Explain: "The run, started with a delay or waiting out the backoff before the next attempt of a step, becomes due now; its attempt count does not change. An engine working its queue takes it within its poll interval.",
		Done:    "Run made due now: an engine working its queue takes it within its poll interval.",
		applies: func(r flow.RunInfo) bool { return r.Status == flow.StatusPending && r.RunAt.After(d.now()) },
		do:      same(d.e.RunNow),
	}, {
		Name: "delete", Label: "Delete", Confirm: "Delete this run?", Danger: true,
		Explain: "The finished run is deleted with its steps, history and signals; a unique key it held is free again. A child whose parent has not finished is kept. This cannot be undone.",
		Done:    "Run deleted.",
		applies: func(r flow.RunInfo) bool { return r.Status.Finished() },
		do:      func(ctx context.Context, e *flow.Engine, id string) (string, error) { return "", e.DeleteRun(ctx, id) },
	}}
}

func (d *Dashboard) deadRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /dead", d.dead)
	mux.HandleFunc("GET /dead/{op}", d.confirmDead)
	mux.HandleFunc("POST /dead/{op}", d.actDead)
	mux.HandleFunc("GET /queues/{queue}/{op}", d.confirmQueue)
	mux.HandleFunc("POST /queues/{queue}/{op}", d.actQueue)
}

// deadData is the dead letters page.
type deadData struct {
	Workflow, Queue string
	Limit           int
	Runs            []flow.RunInfo
	More            bool
	Query           string // the filter, for the bulk buttons
}

func deadFilter(q url.Values) (flow.DeadLetterFilter, string) {
	f := flow.DeadLetterFilter{Workflow: strings.TrimSpace(q.Get("workflow")), Queue: strings.TrimSpace(q.Get("queue"))}
	v := url.Values{}
	if f.Workflow != "" {
		v.Set("workflow", f.Workflow)
	}
	if f.Queue != "" {
		v.Set("queue", f.Queue)
	}
	return f, v.Encode()
}

func (d *Dashboard) dead(w http.ResponseWriter, r *http.Request) {
	f, query := deadFilter(r.URL.Query())
	data := deadData{Workflow: f.Workflow, Queue: f.Queue, Limit: 100, Query: query}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			d.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Invalid limit %q: a number from 1 to 1000.", s))
			return
		}
		data.Limit = n
	}
	f.Limit = data.Limit + 1
	runs, err := d.e.DeadLetters(r.Context(), f)
	if err != nil {
		d.failErr(w, r, "list dead letters", err)
		return
	}
	if len(runs) > data.Limit {
		runs, data.More = runs[:data.Limit], true
	}
	data.Runs = runs
	p := page{Title: "Dead letters", Nav: "dead", Data: data}
	if n := r.URL.Query().Get("n"); n != "" {
		if _, err := strconv.Atoi(n); err == nil {
			switch r.URL.Query().Get("done") {
			case "requeue":
				p.Flash = "Requeued " + n + " dead letter(s)."
			case "purge":
				p.Flash = "Purged " + n + " dead letter(s)."
			}
		}
	}
	d.render(w, r, http.StatusOK, "dead", p)
}

// bulkOp is a bulk operation on the dead letters a filter matches.
type bulkOp struct {
	Name, Label, Confirm, Explain string
	Danger                        bool
	do                            func(context.Context, flow.DeadLetterFilter) (int, error)
}

func (d *Dashboard) bulkOp(name string) (bulkOp, bool) {
	switch name {
	case "requeue":
		return bulkOp{Name: name, Label: "Requeue all", Confirm: "Requeue these dead letters?",
			Explain: "Each is started again from scratch as a new run. Dead letters whose unique key an unfinished run holds are left as they are.",
			do:      d.e.RequeueDead}, true
	case "purge":
		return bulkOp{Name: name, Label: "Purge all", Confirm: "Delete these dead letters?", Danger: true,
			Explain: "They are deleted with their steps, history and signals. This cannot be undone.",
			do:      d.e.PurgeDead}, true
	}
	return bulkOp{}, false
}

func (d *Dashboard) confirmDead(w http.ResponseWriter, r *http.Request) {
	op, ok := d.bulkOp(r.PathValue("op"))
	if !ok {
		d.fail(w, r, http.StatusNotFound, fmt.Sprintf("No operation %q.", r.PathValue("op")))
		return
	}
	if d.readOnly {
		d.fail(w, r, http.StatusForbidden, "The dashboard is read-only: actions are disabled.")
		return
	}
	f, query := deadFilter(r.URL.Query())
	f.Limit = math.MaxInt32
	runs, err := d.e.DeadLetters(r.Context(), f)
	if err != nil {
		d.failErr(w, r, "list dead letters", err)
		return
	}
	data := confirmData{Kind: "dead", Op: op, Matched: len(runs), Workflow: f.Workflow, Queue: f.Queue, Post: d.path("/dead/" + op.Name), Back: d.path("/dead?" + query)}
	d.render(w, r, http.StatusOK, "confirm", page{Title: op.Confirm, Nav: "dead", Data: data})
}

func (d *Dashboard) actDead(w http.ResponseWriter, r *http.Request) {
	if d.readOnly {
		d.fail(w, r, http.StatusForbidden, "The dashboard is read-only: actions are disabled.")
		return
	}
	op, ok := d.bulkOp(r.PathValue("op"))
	if !ok {
		d.fail(w, r, http.StatusNotFound, fmt.Sprintf("No operation %q.", r.PathValue("op")))
		return
	}
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, http.StatusBadRequest, "Bad form: "+err.Error())
		return
	}
	f, query := deadFilter(r.PostForm)
	n, err := op.do(r.Context(), f)
	if err != nil {
		d.failErr(w, r, fmt.Sprintf("%s dead letters (%d done)", op.Name, n), err)
		return
	}
	d.log.Info("operator action", "action", op.Name+" dead letters", "workflow", f.Workflow, "queue", f.Queue, "runs", n, "remote", r.RemoteAddr)
	if query != "" {
		query += "&"
	}
	http.Redirect(w, r, d.path("/dead?")+query+"done="+op.Name+"&n="+strconv.Itoa(n), http.StatusSeeOther)
}

func queueOp(op string) (label, explain string, ok bool) {
	switch op {
	case "pause":
		return "Pause", "Every engine stops claiming runs of this queue at its next poll, until the queue is resumed; runs in flight go on, and runs can still be started in it.", true
	case "resume":
		return "Resume", "Engines claim runs of this queue again within their poll interval.", true
	}
	return "", "", false
}

func (d *Dashboard) confirmQueue(w http.ResponseWriter, r *http.Request) {
	q, op := r.PathValue("queue"), r.PathValue("op")
	label, explain, ok := queueOp(op)
	if !ok && op != "limits" {
		d.fail(w, r, http.StatusNotFound, fmt.Sprintf("No queue operation %q.", op))
		return
	}
	if d.readOnly {
		d.fail(w, r, http.StatusForbidden, "The dashboard is read-only: actions are disabled.")
		return
	}
	if op == "limits" {
		d.confirmLimits(w, r, q)
		return
	}
	data := confirmData{Kind: "queue", Queue: q, Label: label, Explain: explain, Post: d.path("/queues/" + url.PathEscape(q) + "/" + op), Back: d.path("/")}
	d.render(w, r, http.StatusOK, "confirm", page{Title: label + " queue " + q + "?", Nav: "overview", Data: data})
}

func (d *Dashboard) actQueue(w http.ResponseWriter, r *http.Request) {
	if d.readOnly {
		d.fail(w, r, http.StatusForbidden, "The dashboard is read-only: actions are disabled.")
		return
	}
	q, op := r.PathValue("queue"), r.PathValue("op")
	var err error
	switch op {
	case "limits":
		d.actLimits(w, r, q)
		return
	case "pause":
		err = d.e.PauseQueue(r.Context(), q)
	case "resume":
		err = d.e.ResumeQueue(r.Context(), q)
	default:
		d.fail(w, r, http.StatusNotFound, fmt.Sprintf("No queue operation %q.", op))
		return
	}
	if err != nil {
		d.failErr(w, r, op+" queue "+q, err)
		return
	}
	d.log.Info("operator action", "action", op+" queue", "queue", q, "remote", r.RemoteAddr)
	http.Redirect(w, r, d.path("/?done="+op), http.StatusSeeOther)
}

package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

// statuses are the run states in lifecycle order.
func statuses() []flow.RunStatus {
	return []flow.RunStatus{
		flow.StatusPending, flow.StatusRunning, flow.StatusWaiting, flow.StatusCompensating,
		flow.StatusCompleted, flow.StatusFailed, flow.StatusSuspended, flow.StatusCancelled,
	}
}

func (d *Dashboard) funcs() template.FuncMap {
	return template.FuncMap{
		"time":   fmtTime,
		"ago":    d.ago,
		"dur":    fmtDur,
		"trunc":  trunc,
		"pretty": prettyJSON,
		// published lists what a run published (flow.Publish), latest per key.
		"published": flow.Published,
		// progressed lists the steps of a run whose current attempt
		// reported progress (flow.SetProgress).
		"progressed": progressed,
		// percent is a progress's whole percentage, empty when its total
		// is unknown.
		"percent": func(p flow.Progress) string {
			if pct, ok := p.Percent(); ok {
				return fmt.Sprintf("%.0f%%", pct)
			}
			return ""
		},
		// streams lists a run's streams with their last messages.
		"streams":  d.streamTails,
		"statuses": statuses,
		"step": func(name string, occ int) string {
			return fmt.Sprintf("%s#%d", name, occ)
		},
		"query": func(pairs ...string) template.URL {
			q := url.Values{}
			for i := 0; i+1 < len(pairs); i += 2 {
				if pairs[i+1] != "" {
					q.Set(pairs[i], pairs[i+1])
				}
			}
			return template.URL(q.Encode())
		},
		"runURL": func(id string) string { return d.path("/runs/" + url.PathEscape(id)) },
		"path":   d.path,
		// atURL is the run page showing the run after the n-th event.
		"atURL": func(id string, n int) string { return d.path("/runs/" + url.PathEscape(id) + "?at=" + strconv.Itoa(n)) },
		"inc":   func(i int) int { return i + 1 },
		"queueURL": func(q, op string) string {
			return d.path("/queues/" + url.PathEscape(q) + "/" + op)
		},
		"bytes": byteSize,
		"secs": func(d time.Duration) string {
			if d <= 0 {
				return "–"
			}
			return fmtDur(d)
		},
		"actionURL": func(id, action string) string {
			return d.path("/runs/" + url.PathEscape(id) + "/" + action)
		},
		"stepActionURL": func(id, action, name string, occ int) string {
			return d.path("/runs/"+url.PathEscape(id)+"/"+action) + "?" + url.Values{"step": {fmt.Sprintf("%s#%d", name, occ)}}.Encode()
		},
		"topLevel": topLevelCall,
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func (d *Dashboard) ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	dd := d.now().Sub(t)
	switch {
	case dd < 0:
		return "in " + roundDur(-dd)
	case dd < time.Second:
		return "just now"
	}
	return roundDur(dd) + " ago"
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// byteSize prints n bytes for people: 512 B, 128.0 KiB, 64.0 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// fmtDur prints a duration compactly: 850µs, 12ms, 1.24s, 3m5s.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "–"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func trunc(n int, s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// overviewData is the overview page.
type overviewData struct {
	Counts []statusCount
	Total  int64
	Queues []queueRow
	// Limits are the queues with limits, with their use.
	Limits []limitRow
	Health *flow.FileHealth
	// Engines are the reports of the engines that did not stop, or of all
	// with ?engines=all (AllEngines); StoppedHidden counts the others.
	Engines       []flow.Report
	AllEngines    bool
	StoppedHidden int
	// Unworked are the queues with pending runs that no live engine works.
	Unworked []flow.UnworkedQueue
	Now      time.Time // for the engines' liveness
}

type statusCount struct {
	Status flow.RunStatus
	Runs   int64
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	counts, err := d.e.CountRuns(ctx)
	if err != nil {
		d.failErr(w, r, "count runs", err)
		return
	}
	data := overviewData{}
	for _, st := range statuses() {
		data.Counts = append(data.Counts, statusCount{st, counts[st]})
		data.Total += counts[st]
	}
	if data.Queues, err = d.queueRows(ctx); err != nil {
		d.failErr(w, r, "queue statistics", err)
		return
	}
	if data.Limits, err = d.limitRows(ctx); err != nil {
		d.failErr(w, r, "queue limits", err)
		return
	}
	if h, err := d.fileHealth(ctx); err == nil {
		data.Health = &h
	} else if !errors.Is(err, flow.ErrNotSupported) { // PostgreSQL keeps no file
		d.log.Warn("overview: file health", "err", err)
	}
	data.AllEngines = r.URL.Query().Get("engines") == "all"
	if reports, err := d.e.Reports(ctx); err == nil {
		data.Engines, data.StoppedHidden = runningEngines(reports, data.AllEngines)
	} else {
		d.log.Warn("overview: engine reports", "err", err)
	}
	if data.Unworked, err = d.e.UnworkedQueues(ctx); err != nil {
		d.log.Warn("overview: unworked queues", "err", err)
	}
	data.Now = d.now()
	p := page{Title: "Overview", Nav: "overview", Data: data}
	switch r.URL.Query().Get("done") {
	case "pause":
		p.Flash = "Queue paused: engines stop claiming its runs at their next poll."
	case "resume":
		p.Flash = "Queue resumed: engines claim its runs again within their poll interval."
	case "limits":
		p.Flash = "Queue limits set: this engine applies them at once, the others within a second."
	}
	d.render(w, r, http.StatusOK, "overview", p)
}

// runningEngines returns the reports of the engines that did not stop
// (live or silent: a silent one may have crashed), or all of them when all
// is set, and how many it left out: every short-lived process leaves the
// report of a stopped engine until the cleaner deletes it
// (Config.StoppedReportRetention), and those would bury the running ones.
func runningEngines(reports []flow.Report, all bool) ([]flow.Report, int) {
	if all {
		return reports, 0
	}
	out := reports[:0:0]
	for _, r := range reports {
		if r.StoppedAt.IsZero() {
			out = append(out, r)
		}
	}
	return out, len(reports) - len(out)
}

// runsData is the runs page.
type runsData struct {
	Status, Workflow, Queue string
	// The search: ID is a prefix of the run ID, Error a text in its error
	// or reason, Input a top-level input field as field=value.
	ID, Error, Input string
	Limit            int
	Runs             []flow.RunInfo
	More             bool // the limit cut the list
}

func (d *Dashboard) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := runsData{Status: q.Get("status"), Workflow: strings.TrimSpace(q.Get("workflow")), Queue: strings.TrimSpace(q.Get("queue")),
		ID: strings.TrimSpace(q.Get("id")), Error: strings.TrimSpace(q.Get("error")), Input: strings.TrimSpace(q.Get("input")), Limit: 50}
	filter := flow.RunFilter{Workflow: data.Workflow, Queue: data.Queue, IDPrefix: data.ID, ErrorText: data.Error}
	if data.Input != "" {
		field, value, ok := strings.Cut(data.Input, "=")
		field = strings.TrimSpace(field)
		if !ok || field == "" || strings.ContainsAny(field, "\"\\") {
			d.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Invalid input search %q: want field=value, such as customer=dana, with a top-level field of the run's input.", data.Input))
			return
		}
		filter.InputField, filter.InputValue = field, strings.TrimSpace(value)
	}
	var status flow.RunStatus
	if data.Status != "" {
		for _, st := range statuses() {
			if strings.EqualFold(data.Status, string(st)) {
				status = st
			}
		}
		if status == "" {
			d.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Unknown status %q.", data.Status))
			return
		}
		data.Status = string(status)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			d.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Invalid limit %q: a number from 1 to 1000.", s))
			return
		}
		data.Limit = n
	}
	filter.Status, filter.Limit = status, data.Limit+1
	runs, err := d.e.ListRuns(r.Context(), filter)
	if err != nil {
		d.failErr(w, r, "list runs", err)
		return
	}
	if len(runs) > data.Limit {
		runs, data.More = runs[:data.Limit], true
	}
	data.Runs = runs
	p := page{Title: "Runs", Nav: "runs", Data: data}
	if a, ok := d.action(r.URL.Query().Get("done")); ok {
		p.Flash = a.Done // an action that leaves no run to show, e.g. delete
	}
	d.render(w, r, http.StatusOK, "runs", p)
}

// runData is the run page.
type runData struct {
	Run flow.RunInfo
	// HeldBy says which limit of its queue holds the ready run back, if one
	// does.
	HeldBy   string
	Events   []flow.Event
	Timeline timeline
	// Labels name the step calls for people ("price (2 of 5)").
	Labels  stepLabels
	Actions []action
	// StepActions are offered on each row of a top-level step call.
	StepActions []action
	// DAG is the picture of the run's definition with each node's state,
	// for a run of a stored workflow definition (flow/flowdef).
	DAG template.HTML
	// Scrub is the time scrubber over the history; Past is set when the
	// page shows the run as it stood after an earlier event.
	Scrub scrubber
}

// runRefreshSeconds is how often the page of an unfinished run reloads
// itself: often enough to follow a run, rarely enough to read the page.
const runRefreshSeconds = 5

// scrubber is the position of the run page in the run's history: the page
// shows the run as it stood after event At (1 to Total) of its history.
type scrubber struct {
	At, Total  int
	Past       bool      // At < Total: the page shows an earlier state
	When       time.Time // the time of event At
	Prev, Next int       // neighbouring positions; 0 when none
}

func (d *Dashboard) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	// The run, its steps and its history come from one snapshot, so that
	// the timeline built from them agrees with the state shown. A past
	// state (?at=N) is folded from the first N of these events, which
	// never change, so InspectAfter's own snapshot agrees with them.
	info, events, err := d.e.InspectWithHistory(ctx, id)
	if err != nil {
		d.failErr(w, r, "run "+id, err)
		return
	}
	// ?at=N shows the run as it stood after the N-th event of its history,
	// rebuilt by Engine.InspectAfter; the scrubber moves N.
	sc := scrubber{At: len(events), Total: len(events)}
	now := d.now()
	if s := r.URL.Query().Get("at"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > len(events) {
			d.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Invalid position %q in the history: a number from 1 to %d.", s, len(events)))
			return
		}
		sc.At = n
		if n < len(events) {
			st, err := d.e.InspectAfter(ctx, id, events[n-1].ID)
			if err != nil {
				d.failErr(w, r, "run "+id+" in the past", err)
				return
			}
			info, now, sc.Past = st.Run, st.At, true
		}
	}
	if sc.At > 0 {
		sc.When = events[sc.At-1].At
	}
	if sc.At > 1 {
		sc.Prev = sc.At - 1
	}
	if sc.At < sc.Total {
		sc.Next = sc.At + 1
	}
	data := runData{Run: info, Events: events, Timeline: buildTimeline(info, events[:sc.At], now), Scrub: sc, Labels: newStepLabels(info.Steps)}

	data.DAG = d.dag(ctx, info)
	if info.Status == flow.StatusPending && !sc.Past {
		if data.HeldBy, err = d.e.HeldBy(ctx, id); err != nil {
			d.log.Warn("run: held by", "run", id, "err", err)
		}
	}
	if !d.readOnly && !sc.Past {
		data.Actions = d.actionsFor(info)
		data.StepActions = d.stepActionsFor(info)
	}
	p := page{Title: "Run " + id, Nav: "runs", Data: data}
	// A run that moves on by itself reloads; a finished one, a suspended
	// one (it waits for a person) and a past state do not.
	if !sc.Past && !info.Status.Finished() && info.Status != flow.StatusSuspended {
		p.Refresh = runRefreshSeconds
	}
	if a, ok := d.action(r.URL.Query().Get("done")); ok {
		p.Flash = a.Done
	}
	d.render(w, r, http.StatusOK, "run", p)
}

// dag draws the DAG of the stored definition a run runs, nodes coloured by
// their state; it is empty for a Go workflow. A definition that no longer
// reads is logged and left out: the rest of the page still helps.
func (d *Dashboard) dag(ctx context.Context, info flow.RunInfo) template.HTML {
	stored, err := d.e.GetDefinition(ctx, info.Workflow, info.Version)
	if err != nil {
		if !errors.Is(err, flow.ErrDefinitionNotFound) {
			d.log.Warn("read definition", "workflow", info.Workflow, "version", info.Version, "err", err)
		}
		return ""
	}
	def, err := flowdef.Parse(cmp.Or(stored.File, stored.Name), stored.Body)
	if err != nil {
		d.log.Warn("parse definition", "workflow", info.Workflow, "version", info.Version, "err", err)
		return ""
	}
	// flowdef.SVG escapes every text it writes.
	return template.HTML(flowdef.SVG(def, flowdef.NodeStates(def, info)))
}

func (d *Dashboard) suspended(w http.ResponseWriter, r *http.Request) {
	runs, err := d.e.ListRuns(r.Context(), flow.RunFilter{Status: flow.StatusSuspended, Limit: 500})
	if err != nil {
		d.failErr(w, r, "list suspended runs", err)
		return
	}
	type row struct {
		Run     flow.RunInfo
		Actions []action
	}
	rows := make([]row, len(runs))
	for i, run := range runs {
		rows[i].Run = run
		if !d.readOnly {
			rows[i].Actions = d.actionsFor(run)
		}
	}
	d.render(w, r, http.StatusOK, "suspended", page{Title: "Suspended runs", Nav: "suspended", Data: rows})
}

// action is an operator action on one run.
type action struct {
	Name    string // in the URL
	Label   string // on the button
	Confirm string // the question of the confirmation page
	Explain string // what happens
	Done    string // the message after it happened
	Danger  bool
	applies func(flow.RunInfo) bool
	// do applies the action and returns the run to show next ("" for the
	// runs list, when the run is gone).
	do func(ctx context.Context, e *flow.Engine, id string) (string, error)
	// Input, when set, is a value the operator gives on the confirmation
	// page (a time, a step), which with receives instead of do being
	// called; the confirmation page takes its first value from the query
	// parameter of the same name.
	Input *actionInput
	with  func(ctx context.Context, e *flow.Engine, id, value string) (string, error)
	// PerStep actions are offered on the run page's step rows, with the
	// step as their Input, instead of among the run's actions.
	PerStep bool
}

// actionInput is the one field of an action's confirmation form.
type actionInput struct {
	Name        string // the form field and query parameter
	Label, Hint string
	// Fixed shows the value without letting the operator change it, as
	// when a link on the run page chose it (the step to reset from).
	Fixed bool
}

// stepActionsFor lists the actions offered on each step row of run's page
// (action.PerStep) that apply to it.
func (d *Dashboard) stepActionsFor(run flow.RunInfo) []action {
	var out []action
	for _, a := range d.actions() {
		if a.PerStep && a.applies(run) {
			out = append(out, a)
		}
	}
	return out
}

// same adapts an action that leaves the operator on the same run.
func same(f func(ctx context.Context, id string) error) func(context.Context, *flow.Engine, string) (string, error) {
	return func(ctx context.Context, _ *flow.Engine, id string) (string, error) { return id, f(ctx, id) }
}

func (d *Dashboard) actions() []action {
	as := []action{
		{
			Name: "resume", Label: "Resume", Confirm: "Resume this suspended run?",
			Explain: "Its failed compensations get a fresh set of attempts; a run suspended before its workflow failed runs its workflow again. An engine working its queue picks it up within its poll interval.",
			Done:    "Run resumed: an engine working its queue picks it up within its poll interval.",
			applies: func(r flow.RunInfo) bool { return r.Status == flow.StatusSuspended },
			do:      same(d.e.Resume),
		},
		{
			Name: "skip", Label: "Skip failed compensations", Confirm: "Skip the failed compensations of this run?",
			Explain: "They are marked skipped without running (their effects need no undo, or were undone by hand) and the unwind continues with the remaining compensations.",
			Done:    "Failed compensations skipped: the unwind continues.",
			applies: func(r flow.RunInfo) bool {
				if r.Status != flow.StatusSuspended {
					return false
				}
				for _, s := range r.Steps {
					if s.Compensation == "failed" {
						return true
					}
				}
				return len(r.Steps) == 0 && strings.Contains(r.Reason, "compensation")
			},
			do: same(d.e.Skip),
		},
		{
			Name: "cancel", Label: "Cancel", Confirm: "Cancel this run?", Danger: true,
			Explain: "A suspended run is cancelled at once. Any other unfinished run is cancelled by the engine working it: its running step sees the cancellation through its context, its completed steps are compensated, and it ends cancelled.",
			Done:    "Cancellation recorded.",
			applies: func(r flow.RunInfo) bool { return !r.Status.Finished() && !r.CancelRequested },
			do:      same(d.e.Cancel),
		},
	}
	as = append(as, d.jobActions()...)
	as = append(as, d.runOpsActions()...)
	return append(as, d.goBackActions()...)
}

func (d *Dashboard) action(name string) (action, bool) {
	for _, a := range d.actions() {
		if a.Name == name {
			return a, true
		}
	}
	return action{}, false
}

// actionsFor lists the actions that apply to run.
func (d *Dashboard) actionsFor(run flow.RunInfo) []action {
	var out []action
	for _, a := range d.actions() {
		if !a.PerStep && a.applies(run) {
			out = append(out, a)
		}
	}
	return out
}

// confirmData is a confirmation page: of an action on a run (Kind "run"),
// of a bulk operation on dead letters ("dead"), or of a queue pause or
// resume ("queue").
type confirmData struct {
	Kind string
	Post string // where the form posts
	Back string

	Run    flow.RunInfo // run
	Action action

	Op       bulkOp // dead
	Matched  int
	Workflow string

	Queue          string     // dead (the filter) and queue
	Label, Explain string     // queue
	Limits         limitsForm // limits

	Value string // run: the first value of the action's Input
}

func (d *Dashboard) confirm(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("action")
	a, ok := d.action(name)
	if !ok {
		d.fail(w, r, http.StatusNotFound, fmt.Sprintf("No action %q.", name))
		return
	}
	if d.readOnly {
		d.fail(w, r, http.StatusForbidden, "The dashboard is read-only: actions are disabled.")
		return
	}
	info, err := d.e.Inspect(r.Context(), id)
	if err != nil {
		d.failErr(w, r, "run "+id, err)
		return
	}
	data := confirmData{Kind: "run", Run: info, Action: a, Post: d.path("/runs/" + url.PathEscape(id) + "/" + a.Name), Back: d.path("/runs/" + url.PathEscape(id))}
	if a.Input != nil {
		data.Value = r.URL.Query().Get(a.Input.Name)
	}
	d.render(w, r, http.StatusOK, "confirm", page{Title: a.Confirm, Nav: "runs", Data: data})
}

// act performs an action (POST; the cross-origin check ran already).
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("action")
	if d.readOnly {
		d.fail(w, r, http.StatusForbidden, "The dashboard is read-only: actions are disabled.")
		return
	}
	a, ok := d.action(name)
	if !ok {
		d.fail(w, r, http.StatusNotFound, fmt.Sprintf("No action %q.", name))
		return
	}
	var next string
	var err error
	if a.Input != nil {
		if err := r.ParseForm(); err != nil {
			d.fail(w, r, http.StatusBadRequest, "Bad form: "+err.Error())
			return
		}
		v := strings.TrimSpace(r.PostForm.Get(a.Input.Name))
		if v == "" {
			d.fail(w, r, http.StatusBadRequest, a.Input.Label+" is missing.")
			return
		}
		next, err = a.with(r.Context(), d.e, id, v)
		var bad *inputError
		if errors.As(err, &bad) {
			d.fail(w, r, http.StatusBadRequest, bad.Error())
			return
		}
	} else {
		next, err = a.do(r.Context(), d.e, id)
	}
	if err != nil {
		d.failErr(w, r, a.Label+" run "+id, err)
		return
	}
	d.log.Info("operator action", "action", a.Name, "run", id, "next", next, "remote", r.RemoteAddr)
	if next == "" {
		http.Redirect(w, r, d.path("/runs?done="+a.Name), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, d.path("/runs/"+url.PathEscape(next)+"?done="+a.Name), http.StatusSeeOther)
}

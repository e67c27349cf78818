package flowui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/csrf"
)

// maxSignalBody bounds the body of a signal request; the engine enforces
// its own payload limit (Config.MaxPayloadBytes) on what it stores.
const maxSignalBody = 4 << 20

// api serves the JSON API under /api.
type api struct {
	e        *flow.Engine
	log      *slog.Logger
	readOnly bool
}

// apiError is the body of every API error.
type apiError struct {
	Error string `json:"error"`
}

// runsResponse is GET /api/runs.
type runsResponse struct {
	Runs []flow.RunInfo `json:"runs"`
	// More is true when the limit cut the list.
	More bool `json:"more"`
}

// historyResponse is GET /api/runs/{id}/history.
type historyResponse struct {
	Run    string       `json:"run"`
	Events []flow.Event `json:"events"`
}

// queuesResponse is GET /api/queues.
type queuesResponse struct {
	Queues []flow.QueueStats `json:"queues"`
}

// actionResponse is the answer to an action.
type actionResponse struct {
	Action string `json:"action"`
	Run    string `json:"run"`
	// Next is the run to follow: the same run, the new run of a retry,
	// or "" after a delete.
	Next string `json:"next"`
}

// signalRequest is the body of POST /api/runs/{id}/signal.
type signalRequest struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	Key     string          `json:"key"`
}

// signalResponse is the answer to a signal.
type signalResponse struct {
	Run    string `json:"run"`
	Signal string `json:"signal"`
	// Sent is false when a signal with the same key was sent before (the
	// earlier one stands).
	Sent bool `json:"sent"`
}

// csrfResponse is GET /api/csrf.
type csrfResponse struct {
	Token  string `json:"token"`
	Header string `json:"header"`
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/runs", a.runs)
	mux.HandleFunc("GET /api/runs/{id}", a.run)
	mux.HandleFunc("GET /api/runs/{id}/history", a.history)
	mux.HandleFunc("GET /api/queues", a.queues)
	mux.HandleFunc("GET /api/csrf", a.csrf)
	mux.HandleFunc("POST /api/runs/{id}/signal", a.signal)
	mux.HandleFunc("POST /api/runs/{id}/{action}", a.act)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path)})
	})
}

func (a *api) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := flow.RunFilter{Workflow: strings.TrimSpace(q.Get("workflow")), Queue: strings.TrimSpace(q.Get("queue")),
		IDPrefix: strings.TrimSpace(q.Get("id")), ErrorText: strings.TrimSpace(q.Get("error"))}
	if s := strings.TrimSpace(q.Get("input")); s != "" {
		field, value, ok := strings.Cut(s, "=")
		field = strings.TrimSpace(field)
		if !ok || field == "" || strings.ContainsAny(field, "\"\\") {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("invalid input %q: want field=value with a top-level field of the run's input", s)})
			return
		}
		f.InputField, f.InputValue = field, strings.TrimSpace(value)
	}
	if s := q.Get("status"); s != "" {
		st, ok := parseStatus(s)
		if !ok {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("unknown status %q", s)})
			return
		}
		f.Status = st
	}
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("invalid limit %q: a number from 1 to 1000", s)})
			return
		}
		limit = n
	}
	f.Limit = limit + 1
	runs, err := a.e.ListRuns(r.Context(), f)
	if err != nil {
		a.fail(w, "list runs", err)
		return
	}
	resp := runsResponse{Runs: runs}
	if len(runs) > limit {
		resp.Runs, resp.More = runs[:limit], true
	}
	if resp.Runs == nil {
		resp.Runs = []flow.RunInfo{}
	}
	writeJSON(w, http.StatusOK, resp)
}

func parseStatus(s string) (flow.RunStatus, bool) {
	for _, st := range []flow.RunStatus{
		flow.StatusPending, flow.StatusRunning, flow.StatusWaiting, flow.StatusCompensating,
		flow.StatusCompleted, flow.StatusFailed, flow.StatusSuspended, flow.StatusCancelled,
	} {
		if strings.EqualFold(s, string(st)) {
			return st, true
		}
	}
	return "", false
}

func (a *api) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info, err := a.e.Inspect(r.Context(), id)
	if err != nil {
		a.fail(w, "run "+id, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (a *api) history(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	events, err := a.e.History(r.Context(), id)
	if err != nil {
		a.fail(w, "history of run "+id, err)
		return
	}
	if events == nil {
		events = []flow.Event{}
	}
	writeJSON(w, http.StatusOK, historyResponse{Run: id, Events: events})
}

func (a *api) queues(w http.ResponseWriter, r *http.Request) {
	stats, err := a.e.QueueStats(r.Context())
	if err != nil {
		a.fail(w, "queue statistics", err)
		return
	}
	if stats == nil {
		stats = []flow.QueueStats{}
	}
	writeJSON(w, http.StatusOK, queuesResponse{Queues: stats})
}

func (a *api) csrf(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, csrfResponse{Token: csrf.Token(r), Header: csrf.HeaderName})
}

// runActions are the actions on one run; each returns the run to follow.
func (a *api) runActions() map[string]func(ctx context.Context, id string) (string, error) {
	same := func(f func(context.Context, string) error) func(context.Context, string) (string, error) {
		return func(ctx context.Context, id string) (string, error) { return id, f(ctx, id) }
	}
	return map[string]func(context.Context, string) (string, error){
		"cancel":  same(a.e.Cancel),
		"resume":  same(a.e.Resume),
		"skip":    same(a.e.Skip),
		"run-now": same(a.e.RunNow),
		"retry":   a.e.Requeue,
		"delete": func(ctx context.Context, id string) (string, error) {
			return "", a.e.DeleteRun(ctx, id)
		},
	}
}

// act performs an action; read-only mode and the CSRF checks ran already,
// and refuse here again so the handler is safe on its own.
func (a *api) act(w http.ResponseWriter, r *http.Request) {
	if a.readOnly {
		writeJSON(w, http.StatusForbidden, apiError{Error: "request refused: the dashboard is read-only"})
		return
	}
	id, name := r.PathValue("id"), r.PathValue("action")
	do, ok := a.runActions()[name]
	if !ok {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no action %q: want cancel, resume, skip, retry, run-now, delete or signal", name)})
		return
	}
	next, err := do(r.Context(), id)
	if err != nil {
		a.fail(w, name+" run "+id, err)
		return
	}
	a.log.Info("operator action", "action", name, "run", id, "next", next, "remote", r.RemoteAddr, "via", "api")
	writeJSON(w, http.StatusOK, actionResponse{Action: name, Run: id, Next: next})
}

func (a *api) signal(w http.ResponseWriter, r *http.Request) {
	if a.readOnly {
		writeJSON(w, http.StatusForbidden, apiError{Error: "request refused: the dashboard is read-only"})
		return
	}
	id := r.PathValue("id")
	var req signalRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSignalBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("signal run %s: bad body: %v", id, err)})
		return
	}
	if req.Name == "" {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("signal run %s: empty name", id)})
		return
	}
	payload := req.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	var opts *flow.SignalOptions
	if req.Key != "" {
		opts = &flow.SignalOptions{Key: req.Key}
	}
	sent, err := flow.Signal(r.Context(), a.e, id, req.Name, payload, opts)
	if err != nil {
		a.fail(w, "signal run "+id, err)
		return
	}
	a.log.Info("operator action", "action", "signal", "run", id, "signal", req.Name, "sent", sent, "remote", r.RemoteAddr, "via", "api")
	writeJSON(w, http.StatusOK, signalResponse{Run: id, Signal: req.Name, Sent: sent})
}

// fail maps an error of flow to a status and writes it.
func (a *api) fail(w http.ResponseWriter, what string, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, context.Canceled):
		return
	case errors.Is(err, flow.ErrRunNotFound):
		status = http.StatusNotFound
	case errors.Is(err, flow.ErrConflict), errors.Is(err, flow.ErrRunFinished):
		status = http.StatusConflict
	case errors.Is(err, flow.ErrInvalidName), errors.Is(err, flow.ErrPayloadTooLarge):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, apiError{Error: fmt.Sprintf("%s: %v", what, err)})
}

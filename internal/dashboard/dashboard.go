// Package dashboard serves a flowlite database as server-rendered HTML: the
// queues, runs with filters, a run's step timeline (an inline SVG) and
// history, suspended runs and dead letters, with buttons for the operator
// actions, plus /metrics (Prometheus text format), /healthz and /changes (the
// change feed as server-sent events).
//
// Everything it serves is embedded (templates, CSS); it loads nothing from
// another origin, so it works offline. Actions are POST requests behind a
// confirmation page, refused for cross-origin browser requests
// (net/http.CrossOriginProtection) and, in read-only mode, refused with 403
// and not offered.
//
// It reads and acts through flow's public API on an engine it does not
// start: it is an observer and operator, never a worker. On an engine
// opened on a PostgreSQL standby, every page carries a banner saying so
// and how far behind the primary the standby is (standby.go). It imports flow
// (and flow/flowtype, its vocabulary), flow/flowdef (to draw a defined
// workflow's DAG), internal/metrics and the standard library.
//
// flow/flowui is its public face: it mounts the dashboard under a prefix
// (Options.Prefix), wraps it in the application's authorization, checks
// the CSRF token the confirmation forms carry (Options.CSRFToken) and adds
// the JSON API; `flowlite serve` serves flowui.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Options configure a dashboard. A nil *Options means the defaults.
type Options struct {
	// ReadOnly hides the action buttons and refuses actions with 403.
	ReadOnly bool
	// Logger receives request and error logs; default none.
	Logger *slog.Logger
	// Now tells the time for relative times and running bars; default
	// time.Now.
	Now func() time.Time
	// Prefix is the path the dashboard is mounted at ("/ops", no trailing
	// slash), put in front of every link, form and redirect it writes. The
	// dashboard's routes stay unprefixed: whoever mounts it strips Prefix
	// from the request path (flow/flowui does).
	Prefix string
	// CSRFToken, when set, returns the token the forms of state-changing
	// actions carry in the field csrf_token; whoever mounts the dashboard
	// checks it (flow/flowui does).
	CSRFToken func(*http.Request) string
}

// Dashboard is the HTTP handler of the dashboard.
type Dashboard struct {
	e        *flow.Engine
	readOnly bool
	log      *slog.Logger
	now      func() time.Time
	base     string
	csrf     func(*http.Request) string
	pages    map[string]*template.Template
	handler  http.Handler
}

// New returns the dashboard of the database e works on. e need not be
// started; New never starts it.
func New(e *flow.Engine, opts *Options) (*Dashboard, error) {
	if opts == nil {
		opts = &Options{}
	}
	d := &Dashboard{e: e, readOnly: opts.ReadOnly, log: opts.Logger, now: opts.Now, base: strings.TrimSuffix(opts.Prefix, "/"), csrf: opts.CSRFToken, pages: make(map[string]*template.Template)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	// Each page is parsed with the layout on its own, so every page can
	// define "content".
	for _, name := range []string{"overview", "runs", "run", "confirm", "suspended", "dead", "error"} {
		t, err := template.New("layout.html").Funcs(d.funcs()).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: parse template %s: %w", name, err)
		}
		d.pages[name] = t
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.overview)
	mux.HandleFunc("GET /runs", d.runs)
	mux.HandleFunc("GET /runs/{id}", d.run)
	mux.HandleFunc("GET /runs/{id}/{action}", d.confirm)
	mux.HandleFunc("POST /runs/{id}/{action}", d.act)
	mux.HandleFunc("GET /suspended", d.suspended)
	d.deadRoutes(mux)
	mux.HandleFunc("GET /metrics", d.metrics)
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.HandleFunc("GET /changes", d.changes)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, http.StatusNotFound, "No such page: "+r.URL.Path)
	})

	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, http.StatusForbidden, "Cross-origin request refused: actions must come from the dashboard's own pages.")
	}))
	d.handler = d.logRequests(securityHeaders(csrf.Handler(mux)))
	return d, nil
}

// ServeHTTP serves the dashboard.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(w, r) }

// path returns the link to the dashboard's page p ("/runs"), under the
// prefix the dashboard is mounted at.
func (d *Dashboard) path(p string) string { return d.base + p }

// securityHeaders keeps pages from being framed or loading anything from
// elsewhere.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; script-src 'self'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer, to
// flush a stream (/changes) and lift its write deadline.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (d *Dashboard) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		d.log.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
	})
}

// page is what every page template gets.
type page struct {
	Title    string
	Nav      string // the nav entry to highlight
	ReadOnly bool
	Flash    string
	// Standby, when set, says the dashboard reads from a PostgreSQL
	// standby and how far behind the primary it is (standby.go).
	Standby string
	CSRF    string // the token forms that change state carry
	// Refresh, when above 0, reloads the page after that many seconds
	// (a meta refresh: no script needed, and a page whose run finished
	// carries none, so the reloads stop by themselves).
	Refresh int
	Data    any
}

// render executes a page into a buffer first, so a template error becomes
// a clean 500 instead of half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.ReadOnly = d.readOnly
	p.Standby = d.standbyLine(r.Context())
	if d.csrf != nil {
		p.CSRF = d.csrf(r)
	}
	var buf bytes.Buffer
	if err := d.pages[name].Execute(&buf, p); err != nil {
		d.log.Error("render page", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail renders the error page.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	d.render(w, r, status, "error", page{Title: http.StatusText(status), Data: struct {
		Status int
		Text   string
		Msg    string
	}{status, http.StatusText(status), msg}})
}

// failErr maps an error of flow to a status and renders it.
func (d *Dashboard) failErr(w http.ResponseWriter, r *http.Request, what string, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, flow.ErrRunNotFound), errors.Is(err, flow.ErrStepNotFound):
		status = http.StatusNotFound
	case errors.Is(err, flow.ErrConflict), errors.Is(err, flow.ErrRunFinished):
		status = http.StatusConflict
	case errors.Is(err, context.Canceled):
		return
	}
	if status == http.StatusInternalServerError {
		d.log.Error(what, "path", r.URL.Path, "err", err)
	}
	d.fail(w, r, status, fmt.Sprintf("%s: %v", what, err))
}

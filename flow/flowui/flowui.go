// Package flowui is flowlite's dashboard and JSON API as an http.Handler
// that an application mounts in its own server, next to its own routes and
// behind its own login; `flowlite serve` serves the same handler.
//
//	ui, err := flowui.New(eng, &flowui.Options{Prefix: "/flowlite", Authorize: requireAdmin})
//	mux.Handle("/flowlite/", ui)
//
// The handler serves, under Options.Prefix:
//
//	GET  /                          the dashboard's overview (HTML); /runs, /runs/{id}, /suspended, /dead
//	GET  /metrics                   Prometheus text format (see flow/flowprom for collectors)
//	GET  /healthz                   200 when the database can be read, 503 otherwise
//	GET  /api/runs                  runs, newest first: ?status=&workflow=&queue=&limit= (1–1000, default 50),
//	                                search: &id= (ID prefix) &error= (text in error or reason) &input=field=value
//	GET  /api/runs/{id}             one run with its steps
//	GET  /api/runs/{id}/history     a run's event history
//	GET  /api/queues                queue statistics
//	GET  /api/csrf                  {"token": …}, and the cookie it goes with
//	POST /api/runs/{id}/{action}    cancel, resume, skip, retry, run-now, delete
//	POST /api/runs/{id}/signal      body {"name": …, "payload": any JSON, "key": optional}
//	GET  /api/changes               the change feed as server-sent events: ?after=N or
//	                                Last-Event-ID resumes, ?consumer=NAME reads as a
//	                                durable consumer (refused when read-only)
//
// A run ID is one path segment: escape it (url.PathEscape), since the IDs
// of requeued runs hold a slash. The API answers JSON: runs, events and queue statistics with the field
// names of flow.RunInfo, flow.Event and flow.QueueStats, an action with
// {"action", "run", "next"} (next: the run to follow, the new run of a
// retry, "" after a delete), and every error with {"error": "…"} and its
// status: 400 bad input, 403 refused, 404 no such run, 409 the run's state
// does not allow the action.
//
// Security. Options.Authorize wraps every request, pages, API, metrics and
// static files alike: it is where the application's login goes. Every
// request that may change state (any method but GET, HEAD, OPTIONS, TRACE)
// must pass two checks, each refused with 403 and a message saying why:
// net/http.CrossOriginProtection refuses browser requests from another
// origin, and a CSRF token (internal/csrf: an HMAC of a nonce in the
// cookie flowlite_csrf) must come back in the form field csrf_token or the
// header X-CSRF-Token. The dashboard's confirmation forms carry the token;
// a script first GETs /api/csrf, then sends the cookie and the header. A
// bare `curl -X POST …/cancel` has neither and is refused. With
// Options.ReadOnly every such request is refused with 403 before anything
// else looks at it, and the dashboard offers no action buttons.
//
// Layout. The HTML pages, /metrics and /healthz are internal/dashboard's,
// mounted under the prefix; this package adds the prefix handling, the
// security layers and the JSON API, and is the only public face: the
// dashboard's templates and routes may change, the API above may not
// without notice. /api/changes is the dashboard's change stream
// (internal/dashboard's /changes) under the API's stable name, behind the
// same layers.
//
// It imports flow, internal/dashboard, internal/csrf and the standard
// library.
package flowui

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/csrf"
	"github.com/flowlite/flowlite/internal/dashboard"
)

// Options configure the handler. A nil *Options means the defaults: mounted
// at the root, read-write, no authorization, no logs.
type Options struct {
	// Prefix is the path the handler is mounted at, e.g. "/flowlite" (a
	// trailing slash is dropped): it is put in front of every link, form
	// and redirect the handler writes. Mount the handler at Prefix+"/";
	// it strips the prefix itself, and serves paths an outer
	// http.StripPrefix(Prefix, …) stripped already as they are.
	Prefix string
	// ReadOnly hides the action buttons and refuses every state-changing
	// request with 403.
	ReadOnly bool
	// Authorize wraps every request the handler serves; it decides who
	// may see and operate the dashboard (reject with 401 or 403, or pass
	// the request on). Nil lets every request through: then bind the
	// server to localhost or put it behind an authenticating proxy.
	Authorize func(http.Handler) http.Handler
	// Logger receives request, action and error logs; default none.
	Logger *slog.Logger
	// CSRFKey signs the CSRF tokens: at least 32 bytes, the same on every
	// replica behind a load balancer. Nil: a random key per handler, so a
	// restart asks open pages to reload before their next action.
	CSRFKey []byte
}

// Handler serves the dashboard and the JSON API of one engine's database.
type Handler struct {
	handler http.Handler
}

// New returns the handler of the database e works on. e need not be
// started and New never starts it: the handler reads and operates, and the
// application's engines pick up the actions within their poll interval.
func New(e *flow.Engine, opts *Options) (*Handler, error) {
	if e == nil {
		return nil, fmt.Errorf("flowui: nil engine")
	}
	if opts == nil {
		opts = &Options{}
	}
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		return nil, fmt.Errorf("flowui: prefix %q does not start with /", opts.Prefix)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	protector, err := csrf.New(opts.CSRFKey, prefix+"/", func(w http.ResponseWriter, r *http.Request, err error) {
		refuse(w, r, "request refused: "+err.Error())
	})
	if err != nil {
		return nil, fmt.Errorf("flowui: %w", err)
	}
	dash, err := dashboard.New(e, &dashboard.Options{
		ReadOnly:  opts.ReadOnly,
		Logger:    log,
		Prefix:    prefix,
		CSRFToken: csrf.Token,
	})
	if err != nil {
		return nil, fmt.Errorf("flowui: %w", err)
	}

	mux := http.NewServeMux()
	(&api{e: e, log: log, readOnly: opts.ReadOnly}).routes(mux)
	mux.Handle("GET /api/changes", servedAt("/changes", dash))
	mux.Handle("/", dash)

	cross := http.NewCrossOriginProtection()
	cross.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse(w, r, "cross-origin request refused: actions must come from the dashboard's own pages or a client that is not a browser")
	}))
	h := cross.Handler(protector.Handler(mux))
	if opts.ReadOnly {
		h = readOnly(h)
	}
	h = mount(prefix, h)
	if opts.Authorize != nil {
		// Outermost, so it sees every request with its full path.
		h = opts.Authorize(h)
	}
	return &Handler{handler: h}, nil
}

// ServeHTTP serves a request under the prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// mount strips prefix from the path of the requests next gets; a path
// without it was stripped by the application's mux already.
func mount(prefix string, next http.Handler) http.Handler {
	if prefix == "" {
		return next
	}
	strip := http.StripPrefix(prefix, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == prefix {
			// The overview lives at prefix/.
			http.Redirect(w, r, prefix+"/", http.StatusMovedPermanently)
			return
		}
		if !strings.HasPrefix(r.URL.Path, prefix+"/") {
			next.ServeHTTP(w, r)
			return
		}
		strip.ServeHTTP(w, r)
	})
}

// servedAt serves a request as if it had asked for path, keeping its query
// and headers: a route of the API that is a page of the dashboard.
func servedAt(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = path, ""
		next.ServeHTTP(w, r2)
	})
}

// readOnly refuses every request that could change state.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !csrf.Safe(r.Method) {
			refuse(w, r, "request refused: the dashboard is read-only")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers 403 with why: JSON for the API, text for the rest.
func refuse(w http.ResponseWriter, r *http.Request, msg string) {
	if isAPI(r) {
		writeJSON(w, http.StatusForbidden, apiError{Error: msg})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintln(w, msg)
}

// isAPI reports whether r, with the prefix stripped, is a JSON API request.
func isAPI(r *http.Request) bool {
	return r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

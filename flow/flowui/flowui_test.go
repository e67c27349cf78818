package flowui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowui"
	"github.com/flowlite/flowlite/internal/fixture"
)

// prefix is where the tests mount the handler.
const prefix = "/ops"

// mounted serves the handler of a fresh fixture database (internal/fixture)
// under prefix in the server's mux, next to a route of the application.
func mounted(t *testing.T, opts *flowui.Options) (*httptest.Server, *flow.Engine) {
	t.Helper()
	e, err := flowsqlite.Open(context.Background(), fixture.Build(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &flowui.Options{}
	}
	opts.Prefix = prefix
	ui, err := flowui.New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", ui)
	mux.HandleFunc("/app", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the application") })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, e
}

// client returns a client with a cookie jar that does not follow
// redirects.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches url and returns the status and body.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// do sends a request and returns the response with its body read.
func do(t *testing.T, c *http.Client, method, url string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var (
	linkRE  = regexp.MustCompile(`(?:href|action)="([^"]*)"`)
	tokenRE = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
)

func status(t *testing.T, e *flow.Engine, id string) flow.RunInfo {
	t.Helper()
	info, err := e.Inspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestMountedLinks follows every link of every page reachable from the
// overview of the handler mounted under a prefix: each stays under the
// prefix and answers 200.
func TestMountedLinks(t *testing.T) {
	t.Parallel()
	srv, _ := mounted(t, nil)
	c := client(t)

	resp, _ := do(t, c, "GET", srv.URL+prefix, nil, "")
	// The application's mux or the handler redirects the bare mount path.
	if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != prefix+"/" {
		t.Errorf("GET %s: %d to %q, want a redirect to %s/", prefix, resp.StatusCode, resp.Header.Get("Location"), prefix)
	}
	if code, body := get(t, c, srv.URL+"/app"); code != 200 || body != "the application" {
		t.Errorf("the application's own route: %d %q", code, body)
	}

	seen := map[string]bool{}
	queue := []string{prefix + "/", prefix + "/runs/" + fixture.SagaRun, prefix + "/runs/" + fixture.StuckRun}
	for len(queue) > 0 && len(seen) < 200 {
		link := queue[0]
		queue = queue[1:]
		if seen[link] {
			continue
		}
		seen[link] = true
		code, body := get(t, c, srv.URL+link)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", link, code)
			continue
		}
		if !strings.Contains(body, "<html") {
			continue // metrics, healthz, CSS
		}
		for _, m := range linkRE.FindAllStringSubmatch(body, -1) {
			href := strings.ReplaceAll(m[1], "&amp;", "&")
			if !strings.HasPrefix(href, prefix+"/") {
				t.Errorf("page %s links to %q, outside %s/", link, href, prefix)
				continue
			}
			if u, err := url.Parse(href); err == nil && !seen[u.String()] {
				queue = append(queue, u.String())
			}
		}
	}
	for _, want := range []string{prefix + "/runs", prefix + "/dead", prefix + "/static/style.css", prefix + "/metrics", prefix + "/runs/" + fixture.StuckRun + "/resume"} {
		if !seen[want] {
			t.Errorf("no page links to %s", want)
		}
	}
}

// TestActionsNeedToken: a bare POST, as curl sends it, is refused with 403
// and a reason and changes nothing; a wrong token and a cross-origin
// request too; the confirmation form's token and the API's token work.
func TestActionsNeedToken(t *testing.T) {
	t.Parallel()
	srv, e := mounted(t, nil)
	c := client(t)

	for _, path := range []string{"/runs/" + fixture.StuckRun + "/cancel", "/api/runs/" + fixture.StuckRun + "/cancel"} {
		resp, body := do(t, http.DefaultClient, "POST", srv.URL+prefix+path, nil, "")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no CSRF cookie") {
			t.Errorf("bare POST %s: %d %q, want 403 naming the missing CSRF cookie", path, resp.StatusCode, body)
		}
	}
	if info := status(t, e, fixture.StuckRun); info.CancelRequested || info.Status != flow.StatusSuspended {
		t.Fatalf("a refused cancel changed the run: %s, cancel requested %v", info.Status, info.CancelRequested)
	}

	// The confirmation page's form carries the token.
	code, page := get(t, c, srv.URL+prefix+"/runs/"+fixture.StuckRun+"/resume")
	if code != http.StatusOK {
		t.Fatalf("confirmation page: %d", code)
	}
	m := tokenRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the confirmation form carries no csrf_token:\n%s", page)
	}
	if !strings.Contains(page, `action="`+prefix+`/runs/`+fixture.StuckRun+`/resume"`) {
		t.Errorf("the form does not post under the prefix")
	}
	form := func(token string) (*http.Response, string) {
		return do(t, c, "POST", srv.URL+prefix+"/runs/"+fixture.StuckRun+"/resume",
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, url.Values{"csrf_token": {token}}.Encode())
	}
	if resp, body := form("forged"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "does not match") {
		t.Errorf("POST with a wrong token: %d %q, want 403", resp.StatusCode, body)
	}
	if resp, body := do(t, c, "POST", srv.URL+prefix+"/runs/"+fixture.StuckRun+"/resume",
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"cross-site"}}, "csrf_token="+url.QueryEscape(m[1])); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "cross-origin") {
		t.Errorf("cross-site POST with the token: %d %q, want 403", resp.StatusCode, body)
	}
	if info := status(t, e, fixture.StuckRun); info.Status != flow.StatusSuspended {
		t.Fatalf("refused resumes changed the run: %s", info.Status)
	}
	resp, body := form(m[1])
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != prefix+"/runs/"+fixture.StuckRun+"?done=resume" {
		t.Fatalf("POST with the form's token: %d to %q, %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if info := status(t, e, fixture.StuckRun); info.Status != flow.StatusCompensating {
		t.Errorf("after resume the run is %s, want compensating", info.Status)
	}

	// The API: GET /api/csrf, then the header.
	code, body = get(t, c, srv.URL+prefix+"/api/csrf")
	var tok struct{ Token, Header string }
	if err := json.Unmarshal([]byte(body), &tok); err != nil || code != 200 || tok.Token == "" || tok.Header != "X-CSRF-Token" {
		t.Fatalf("GET /api/csrf: %d %s (%v)", code, body, err)
	}
	resp, body = do(t, c, "POST", srv.URL+prefix+"/api/runs/"+fixture.PendingRun+"/cancel", http.Header{"X-Csrf-Token": {tok.Token}}, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("API cancel with the token: %d %s", resp.StatusCode, body)
	}
	var act struct{ Action, Run, Next string }
	if err := json.Unmarshal([]byte(body), &act); err != nil || act.Action != "cancel" || act.Next != fixture.PendingRun {
		t.Errorf("API cancel answered %s (%v)", body, err)
	}
	if info := status(t, e, fixture.PendingRun); !info.CancelRequested && info.Status != flow.StatusCancelled {
		t.Errorf("after the API cancel the run is %s, cancel requested %v", info.Status, info.CancelRequested)
	}
}

// TestReadOnly: no action buttons, and every state-changing request is
// refused, with a valid token too.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	srv, e := mounted(t, &flowui.Options{ReadOnly: true})
	c := client(t)

	code, page := get(t, c, srv.URL+prefix+"/runs/"+fixture.StuckRun)
	if code != http.StatusOK {
		t.Fatalf("run page: %d", code)
	}
	if strings.Contains(page, `id="action-`) || strings.Contains(page, "/resume") {
		t.Errorf("the read-only run page offers actions")
	}
	if code, _ := get(t, c, srv.URL+prefix+"/runs/"+fixture.StuckRun+"/cancel"); code != http.StatusForbidden {
		t.Errorf("read-only confirmation page: %d, want 403", code)
	}
	_, body := get(t, c, srv.URL+prefix+"/api/csrf")
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(body), &tok); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/runs/" + fixture.StuckRun + "/cancel", ""},
		{"POST", "/api/runs/" + fixture.StuckRun + "/cancel", ""},
		{"POST", "/api/runs/" + fixture.StuckRun + "/signal", `{"name":"go"}`},
		{"POST", "/queues/batch/pause", ""},
		{"POST", "/dead/purge", ""},
		{"DELETE", "/api/runs/" + fixture.DoneRun, ""},
		{"PUT", "/runs/" + fixture.StuckRun, ""},
	} {
		resp, body := do(t, c, r.method, srv.URL+prefix+r.path, http.Header{"X-Csrf-Token": {tok.Token}}, r.body)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("read-only %s %s: %d %q, want 403 naming read-only", r.method, r.path, resp.StatusCode, body)
		}
	}
	if info := status(t, e, fixture.StuckRun); info.Status != flow.StatusSuspended || info.CancelRequested {
		t.Errorf("read-only requests changed the run: %s", info.Status)
	}
	if code, _ := get(t, c, srv.URL+prefix+"/api/runs/"+fixture.StuckRun); code != http.StatusOK {
		t.Errorf("read-only API read: %d", code)
	}
}

// TestAuthorize: the hook sees every request, with its full path, and what
// it refuses never reaches the dashboard.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	authorize := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path)
			mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer operator" {
				http.Error(w, "who are you?", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv, e := mounted(t, &flowui.Options{Authorize: authorize})
	paths := []string{"/", "/runs", "/runs/" + fixture.SagaRun, "/suspended", "/dead", "/metrics", "/healthz", "/static/style.css",
		"/api/runs", "/api/runs/" + fixture.SagaRun, "/api/runs/" + fixture.SagaRun + "/history", "/api/queues", "/api/csrf", "/no-such-page"}
	for _, p := range paths {
		if code, _ := get(t, http.DefaultClient, srv.URL+prefix+p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", p, code)
		}
	}
	if resp, _ := do(t, http.DefaultClient, "POST", srv.URL+prefix+"/api/runs/"+fixture.StuckRun+"/cancel", nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without credentials: %d, want 401", resp.StatusCode)
	}
	auth := http.Header{"Authorization": {"Bearer operator"}}
	for _, p := range paths[:len(paths)-1] {
		if resp, body := do(t, http.DefaultClient, "GET", srv.URL+prefix+p, auth, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with credentials: %d %s", p, resp.StatusCode, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := 2*len(paths) + 1 - 1; len(seen) != want {
		t.Errorf("the hook saw %d requests, want %d: %v", len(seen), want, seen)
	}
	for _, s := range seen {
		if !strings.Contains(s, " "+prefix+"/") {
			t.Errorf("the hook saw %q, not the full path", s)
		}
	}
	if info := status(t, e, fixture.StuckRun); info.CancelRequested {
		t.Error("an unauthorized cancel reached the engine")
	}
}

// TestMountedWithStripPrefix: an application that strips the prefix itself,
// as http.StripPrefix mounts usually go, gets the same links and actions.
func TestMountedWithStripPrefix(t *testing.T) {
	t.Parallel()
	e, err := flowsqlite.Open(context.Background(), fixture.Build(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ui, err := flowui.New(e, &flowui.Options{Prefix: "/flowlite/"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/flowlite/", http.StripPrefix("/flowlite", ui))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	c := client(t)
	code, page := get(t, c, srv.URL+"/flowlite/runs/"+fixture.StuckRun+"/cancel")
	if code != http.StatusOK {
		t.Fatalf("confirmation page: %d", code)
	}
	for _, m := range linkRE.FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "/flowlite/") {
			t.Errorf("link %q outside /flowlite/", m[1])
		}
	}
	token := tokenRE.FindStringSubmatch(page)
	if token == nil {
		t.Fatal("no csrf_token in the form")
	}
	resp, body := do(t, c, "POST", srv.URL+"/flowlite/runs/"+fixture.StuckRun+"/cancel",
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "csrf_token="+url.QueryEscape(token[1]))
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/flowlite/runs/"+fixture.StuckRun) {
		t.Fatalf("cancel: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if info := status(t, e, fixture.StuckRun); info.Status != flow.StatusCancelled {
		t.Errorf("after cancel the suspended run is %s, want cancelled", info.Status)
	}
}

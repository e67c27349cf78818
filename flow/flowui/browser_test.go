package flowui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowui"
	"github.com/flowlite/flowlite/internal/fixture"
)

// chromium returns the browser to drive, skipping the test when there is
// none and FLOWLITE_BROWSER_TEST (which CI sets) is not set; FLOWLITE_CHROMIUM
// names the binary. The same rules as internal/dashboard's browser test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, c := range []string{os.Getenv("FLOWLITE_CHROMIUM"), "chromium", "/usr/bin/chromium", "chromium-browser"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("FLOWLITE_BROWSER_TEST") != "" {
		t.Fatal("FLOWLITE_BROWSER_TEST is set but no chromium was found (install Debian's chromium package, or set FLOWLITE_CHROMIUM)")
	}
	t.Skip("no chromium found; install it and set FLOWLITE_BROWSER_TEST=1 to run the browser test")
	return ""
}

// TestBrowserEmbedded drives the handler the way an application embeds it:
// mounted under /ops in the application's mux, behind the application's
// login (a session cookie its /login sets). Headless Chromium logs in,
// follows the dashboard's links, resumes a suspended run through its
// confirmation form, and calls the JSON API from the page: without the
// CSRF token it is refused, with it the run is cancelled.
func TestBrowserEmbedded(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := flowsqlite.Open(ctx, fixture.Build(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	var mu sync.Mutex
	var refused, allowed int
	authorize := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := r.Cookie("session")
			mu.Lock()
			ok := err == nil && c.Value == "operator"
			if ok {
				allowed++
			} else {
				refused++
			}
			mu.Unlock()
			if !ok {
				http.Error(w, "log in first", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	ui, err := flowui.New(e, &flowui.Options{Prefix: "/ops", Authorize: authorize})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", ui)
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "operator", Path: "/", HttpOnly: true})
		http.Redirect(w, r, "/ops/", http.StatusSeeOther)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer func() {
		cancelBrowser()
		_ = chromedp.Cancel(bctx)
	}()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		must("text of "+sel, err)
		return s
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(bctx, chromedp.Location())
		must("location", err)
		return strings.TrimPrefix(loc, srv.URL)
	}

	// Before logging in, the application's hook turns the browser away.
	must("open before login", chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ops/")))
	if got := text("body"); !strings.Contains(got, "log in first") {
		t.Errorf("before login the dashboard shows %q", got)
	}

	must("log in", chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/login"),
		chromedp.WaitVisible(chromedp.CSS(".cards")),
	))
	if got := location(); got != "/ops/" {
		t.Errorf("after login the browser is at %s, want /ops/", got)
	}
	if got := text(".card.status-suspended .n"); got != "1" {
		t.Errorf("overview: %s suspended runs, want 1", got)
	}

	// The nav links and the run links stay under the prefix.
	must("runs by the nav", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/ops/runs"]`)),
		chromedp.WaitVisible(chromedp.ID("runs")),
		chromedp.Click(chromedp.CSS(`#runs a[href="/ops/runs/`+fixture.SagaRun+`"]`)),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	))
	if got := location(); got != "/ops/runs/"+fixture.SagaRun {
		t.Errorf("run page at %s", got)
	}

	// Resume the suspended run through its confirmation form.
	must("resume", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`nav a[href="/ops/suspended"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#suspended tr[data-run="`+fixture.StuckRun+`"]`)),
		chromedp.Click(chromedp.CSS(`#suspended tr[data-run="`+fixture.StuckRun+`"] a[href="/ops/runs/`+fixture.StuckRun+`/resume"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	))
	if got := location(); got != "/ops/runs/"+fixture.StuckRun+"?done=resume" {
		t.Errorf("after resume the browser is at %s", got)
	}
	info, err := e.Inspect(ctx, fixture.StuckRun)
	must("inspect", err)
	if info.Status != flow.StatusCompensating {
		t.Errorf("after resume the database says %s, want compensating", info.Status)
	}

	// The JSON API from the page's own script context: same origin, so
	// only the token is missing, and the refusal says so.
	bare, err := chromedp.Run(bctx, chromedp.Evaluate[string](
		`fetch("/ops/api/runs/`+fixture.PendingRun+`/cancel", {method: "POST"}).then(r => r.status + " " + r.headers.get("Content-Type"))`, chromedp.EvalAwaitPromise))
	must("API cancel without a token", err)
	if bare != "403 application/json" {
		t.Errorf("API cancel without a token: %q, want 403", bare)
	}
	withToken, err := chromedp.Run(bctx, chromedp.Evaluate[string](
		`fetch("/ops/api/csrf").then(r => r.json()).then(t => fetch("/ops/api/runs/`+fixture.PendingRun+`/cancel", {method: "POST", headers: {[t.header]: t.token}})).then(r => r.json()).then(j => j.action + " " + j.run)`, chromedp.EvalAwaitPromise))
	must("API cancel with the token", err)
	if withToken != "cancel "+fixture.PendingRun {
		t.Errorf("API cancel with the token answered %q", withToken)
	}
	info, err = e.Inspect(ctx, fixture.PendingRun)
	must("inspect", err)
	if !info.CancelRequested && info.Status != flow.StatusCancelled {
		t.Errorf("after the API cancel the run is %s, cancel requested %v", info.Status, info.CancelRequested)
	}

	mu.Lock()
	defer mu.Unlock()
	if refused != 1 || allowed < 10 {
		t.Errorf("the authorization hook refused %d and allowed %d requests, want 1 and every later one", refused, allowed)
	}
}

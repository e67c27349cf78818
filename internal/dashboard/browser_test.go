package dashboard

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowlite/flowlite/flow"
)

// Environment of the browser test.
const (
	// envBrowserTest set (to anything) makes a missing browser a failure
	// instead of a skip; CI sets it.
	envBrowserTest = "FLOWLITE_BROWSER_TEST"
	// envChromium names the browser binary; default chromium on $PATH or
	// /usr/bin/chromium (Debian's package).
	envChromium = "FLOWLITE_CHROMIUM"
	// envScreenshots names a directory to save dashboard-*.png into.
	envScreenshots = "FLOWLITE_SCREENSHOT_DIR"
)

// chromium returns the browser to drive, skipping the test when there is
// none and the browser test was not asked for.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv(envChromium), "chromium", "/usr/bin/chromium", "chromium-browser"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv(envBrowserTest) != "" {
		t.Fatalf("%s is set but no chromium was found (install Debian's chromium package, or set %s)", envBrowserTest, envChromium)
	}
	t.Skipf("no chromium found; install it and set %s=1 to run the browser test", envBrowserTest)
	return ""
}

// TestBrowser drives the dashboard in headless Chromium: overview, filter
// the runs, open a run and its timeline, resume a suspended run through its
// confirmation page, and checks the database changed.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	path := fixtureDB(t)
	srv, e := server(t, path, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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

	shot := func(name string) {
		t.Helper()
		dir := os.Getenv(envScreenshots)
		if dir == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		file := filepath.Join(dir, "dashboard-"+name+".png")
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Errorf("save screenshot: %v", err)
			return
		}
		t.Logf("screenshot: %s", file)
	}
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
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](js))
		must(js, err)
		return n
	}

	// The overview counts runs by state.
	must("open overview", chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(".cards")),
	))
	if got := text(".card.status-suspended .n"); got != "1" {
		t.Errorf("overview: %s suspended runs, want 1", got)
	}
	shot("overview")

	// Filter the runs by status with the form.
	must("filter runs", chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/runs"),
		chromedp.WaitVisible(chromedp.ID("runs")),
		chromedp.SetValue(chromedp.ID("f-status"), "failed"),
		chromedp.Click(chromedp.ID("f-apply")),
	))
	// The unfiltered page shows the run too: wait for the filtered one
	// (evaluating while the browser navigates fails; try again).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`location.search.includes("status=failed") && document.readyState === "complete"`))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the filtered runs page did not load: %v", err)
		}
	}
	must("filtered runs", chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`#runs tr[data-run="`+sagaRun+`"]`)),
	))
	if n := eval(`document.querySelectorAll("#runs tbody tr").length`); n != 1 {
		t.Errorf("runs filtered by status failed: %d rows, want 1", n)
	}
	loc, err := chromedp.Run(bctx, chromedp.Location())
	must("location", err)
	if !strings.Contains(loc, "status=failed") {
		t.Errorf("filter did not reach the query string: %s", loc)
	}
	shot("runs")

	// Open the run: its timeline draws steps and compensations.
	must("open run", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#runs a[href="/runs/`+sagaRun+`"]`)),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	))
	if got := text("#run-status"); got != "failed" {
		t.Errorf("run page status %q, want failed", got)
	}
	if n := eval(`document.querySelectorAll("#timeline rect.bar[class*='step-']").length`); n != 3 {
		t.Errorf("timeline: %d step bars, want 3 (reserve, ship, charge)", n)
	}
	if n := eval(`document.querySelectorAll("#timeline rect.comp-completed").length`); n != 1 {
		t.Errorf("timeline: %d compensation bars, want 1 (reserve)", n)
	}
	if n := eval(`document.querySelectorAll("#history tbody tr").length`); n < 8 {
		t.Errorf("history: %d events", n)
	}
	actions, err := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll(".actions a")).map(a => a.getAttribute("href").split("/").pop()).join(",")`))
	must("actions of a failed run", err)
	if got := actions; got != "retry,delete,revive" {
		t.Errorf("a failed run offers actions %v, want retry, delete and revive", got)
	}
	shot("run")

	// Resume the suspended run through the confirmation page.
	must("resume", chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/suspended"),
		chromedp.WaitVisible(chromedp.CSS(`#suspended tr[data-run="`+stuckRun+`"]`)),
	))
	shot("suspended")
	must("resume", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#suspended tr[data-run="`+stuckRun+`"] a[href$="/resume"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	))
	shot("confirm")
	if info, err := e.Inspect(ctx, stuckRun); err != nil || info.Status != flow.StatusSuspended {
		t.Fatalf("before confirming: %v, %v", info.Status, err)
	}
	must("confirm", chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	))
	if got := text("#run-status"); got != "compensating" {
		t.Errorf("after resume the page says %q, want compensating", got)
	}
	info, err := e.Inspect(ctx, stuckRun)
	must("inspect", err)
	if info.Status != flow.StatusCompensating {
		t.Errorf("after resume the database says %s, want compensating", info.Status)
	}
	shot("resumed")
	browserJobSteps(t, bctx, srv.URL, e, shot)
}

package dashboard

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// price and fanOut give the fixture a run with a fan-out: five branches of
// an All, each calling step price.
var (
	price  = flow.Step[int, int]{Name: "price", Run: func(_ context.Context, n int) (int, error) { return 100 * n, nil }}
	fanOut = flow.Workflow[int, int]{Name: "price_lines", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		branches := make([]func(flow.Context) (int, error), n)
		for i := range branches {
			branches[i] = func(bc flow.Context) (int, error) { return flow.Do(bc, price, i) }
		}
		out, err := flow.All(wc, branches...)
		return len(out), err
	}}
)

// addFanOutRun runs fanOut with five branches on the database at path.
func addFanOutRun(t *testing.T, ctx context.Context, path string) string {
	t.Helper()
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 5 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, fanOut)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := flow.Start(ctx, e, fanOut, 5, &flow.StartOptions{RunID: "fan-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return r.ID()
}

// TestBrowserOperatorView renders the runs list and run pages in headless
// Chromium at 1024x800 and checks what a person sees (issue 22): the
// short cells of the runs list stay on one line, the search form finds a
// run by its input, branch calls read "price (3 of 5)" with the recorded
// name as a tooltip, and only an unfinished run's page reloads itself.
// Screenshots go to $FLOWLITE_SCREENSHOT_DIR when set, else to a temporary
// directory; each must be a real picture.
func TestBrowserOperatorView(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := fixtureDB(t)
	fan := addFanOutRun(t, ctx, path)
	srv, _ := server(t, path, nil)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1024, 800),
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
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		dir = t.TempDir()
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		must("screenshot "+name, err)
		if len(png) < 10<<10 {
			t.Errorf("screenshot %s: %d bytes, not a rendered page", name, len(png))
		}
		file := filepath.Join(dir, "operator-"+name+".png")
		must("save screenshot", os.WriteFile(file, png, 0o644))
		t.Logf("screenshot: %s", file)
	}
	evalString := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		must(js, err)
		return s
	}
	evalBool := func(js string) bool {
		t.Helper()
		b, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js))
		must(js, err)
		return b
	}
	waitFor := func(js string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js)); err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", js)
			}
		}
	}

	// The runs list: every short cell holds one line of text.
	must("open runs", chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/runs"), chromedp.WaitVisible(chromedp.ID("runs"))))
	// (A cell is as tall as its row: measure the text, not the cell.)
	wrapped := evalString(`Array.from(document.querySelectorAll("#runs tbody td")).filter(td => !td.classList.contains("wide")).filter(td => {
		const r = document.createRange();
		r.selectNodeContents(td);
		const rects = Array.from(r.getClientRects()).filter(x => x.width > 0);
		const top = Math.min(...rects.map(x => x.top)), bottom = Math.max(...rects.map(x => x.bottom));
		return bottom - top > parseFloat(getComputedStyle(td).fontSize) * 1.9;
	}).map(td => td.closest("tr").dataset.run + ": " + td.textContent.trim()).join("; ")`)
	if wrapped != "" {
		t.Errorf("runs list cells wrap onto two lines: %s", wrapped)
	}
	shot("runs")

	// Search by input through the form.
	must("search", chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("f-input"), "item=lamp"),
		chromedp.Click(chromedp.ID("f-apply")),
	))
	waitFor(`location.search.includes("input=item") && document.readyState === "complete"`)
	if got := evalString(`Array.from(document.querySelectorAll("#runs tbody tr")).map(tr => tr.dataset.run).join(",")`); got != sagaRun {
		t.Errorf("runs searched by input item=lamp: %q, want %s", got, sagaRun)
	}
	shot("search")

	// The fan-out run: branch calls by step name and place, the recorded
	// name a tooltip; a finished run does not reload.
	must("open fan-out run", chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/runs/"+fan), chromedp.WaitVisible(chromedp.ID("timeline"))))
	labels := evalString(`Array.from(document.querySelectorAll("#timeline text.label")).map(t => t.firstChild.textContent).join(",")`)
	if !evalBool(`document.querySelectorAll("#timeline text.label").length === 5`) {
		t.Errorf("timeline labels %q, want five", labels)
	}
	for _, want := range []string{"price (1 of 5)", "price (3 of 5)", "price (5 of 5)"} {
		if !evalBool(`Array.from(document.querySelectorAll("#timeline text.label")).some(t => t.firstChild.textContent === "` + want + `")`) {
			t.Errorf("timeline lacks the label %q: %s", want, labels)
		}
	}
	if got := evalString(`(Array.from(document.querySelectorAll("#steps code")).find(c => c.textContent === "price (3 of 5)") || {title: "none"}).title`); got != "all0.2/price#0" {
		t.Errorf("steps table: the tooltip of price (3 of 5) is %q, want all0.2/price#0", got)
	}
	if evalBool(`document.body.innerText.includes("all0.")`) {
		t.Errorf("the run page shows recorded branch names as text")
	}
	if evalBool(`!!document.getElementById("auto-refresh")`) {
		t.Errorf("the page of a finished run reloads itself")
	}
	shot("fan-out")

	// The pending run's page reloads itself.
	must("open pending run", chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/runs/"+pendingRun), chromedp.WaitVisible(chromedp.ID("run-status"))))
	if got := evalString(`(document.getElementById("auto-refresh") || {content: ""}).content`); got != "5" {
		t.Errorf("the pending run's page: refresh %q, want 5 (seconds)", got)
	}
	shot("pending")
}

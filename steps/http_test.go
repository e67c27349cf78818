package steps_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
	"github.com/flowlite/flowlite/steps"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type charge struct {
	Order string `json:"order"`
	Cents int    `json:"cents"`
}

type receipt struct {
	ID string `json:"id"`
}

// paymentServer answers /charge with failures as scripted, and records the
// idempotency keys it saw.
type paymentServer struct {
	mu       sync.Mutex
	statuses []int // status of each successive /charge call; then 200
	keys     []string
	undone   []string
}

func (p *paymentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.URL.Path {
	case "/charge":
		p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
		if len(p.statuses) > 0 {
			status := p.statuses[0]
			p.statuses = p.statuses[1:]
			http.Error(w, "scripted failure", status)
			return
		}
		var c charge
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(receipt{ID: "rcpt-" + c.Order})
	case "/refund":
		var body struct {
			Output receipt `json:"output"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		p.undone = append(p.undone, body.Output.ID)
		_, _ = w.Write([]byte("{}"))
	}
}

func chargeWorkflow(step flow.Step[charge, receipt], failAfter bool) flow.Workflow[charge, receipt] {
	return flow.Workflow[charge, receipt]{Name: "checkout", Run: func(wc flow.Context, c charge) (receipt, error) {
		r, err := flow.Do(wc, step, c)
		if err == nil && failAfter {
			return receipt{}, errors.New("shipping refused")
		}
		return r, err
	}}
}

func TestHTTPStepRetriesServerErrorsWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := &paymentServer{statuses: []int{503, 429}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	env := flowtest.New(t, nil)
	step := steps.HTTP[charge, receipt]{Name: "charge", URL: ts.URL + "/charge",
		Retry: &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}}.Step()

	got, run, err := flowtest.RunWorkflow(env, chargeWorkflow(step, false), charge{Order: "o1", Cents: 100})
	if err != nil || got.ID != "rcpt-o1" {
		t.Fatalf("result = %+v, %v", got, err)
	}
	if len(srv.keys) != 3 || srv.keys[0] != srv.keys[2] || !strings.HasPrefix(srv.keys[0], run.ID()+"/charge#0") {
		t.Fatalf("idempotency keys %q: want 3 equal keys for run %s", srv.keys, run.ID())
	}
}

func TestHTTPStepClientErrorIsPermanent(t *testing.T) {
	t.Parallel()
	srv := &paymentServer{statuses: []int{402}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	env := flowtest.New(t, nil)
	step := steps.HTTP[charge, receipt]{Name: "charge", URL: ts.URL + "/charge"}.Step()

	_, _, err := flowtest.RunWorkflow(env, chargeWorkflow(step, false), charge{Order: "o2"})
	if !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "402") {
		t.Fatalf("err = %v, want rolled back naming the 402", err)
	}
	if len(srv.keys) != 1 {
		t.Fatalf("%d calls, want 1 (no retry of a 4xx)", len(srv.keys))
	}
}

func TestHTTPStepUndoURLCompensates(t *testing.T) {
	t.Parallel()
	srv := &paymentServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	env := flowtest.New(t, nil)
	step := steps.HTTP[charge, receipt]{Name: "charge", URL: ts.URL + "/charge", UndoURL: ts.URL + "/refund"}.Step()

	_, run, err := flowtest.RunWorkflow(env, chargeWorkflow(step, true), charge{Order: "o3"})
	if !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want rolled back", err)
	}
	if len(srv.undone) != 1 || srv.undone[0] != "rcpt-o3" {
		t.Fatalf("refunded %v, want [rcpt-o3]", srv.undone)
	}
	if got := env.Compensated(run.ID()); len(got) != 1 || got[0] != "charge" {
		t.Fatalf("compensated %v", got)
	}
}

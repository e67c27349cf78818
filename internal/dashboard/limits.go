package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// limitRow is one queue with limits (flow control) on the overview: each
// limit as text ("-" for none) and what the limits hold now.
type limitRow struct {
	Queue                                      string
	Concurrency, Rate, KeyConcurrency, KeyRate string
	Keys                                       string
	Running, Started, Ready, HeldBack          int
}

func (d *Dashboard) limitRows(ctx context.Context) ([]limitRow, error) {
	uses, err := d.e.QueueLimits(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]limitRow, len(uses))
	for i, u := range uses {
		l := u.Limits
		rows[i] = limitRow{Queue: u.Queue, Concurrency: countText(l.Concurrency), Rate: l.Rate.String(),
			KeyConcurrency: countText(l.KeyConcurrency), KeyRate: l.KeyRate.String(), Keys: keysText(l),
			Running: u.Running, Started: u.Started, Ready: u.Ready, HeldBack: u.HeldBack}
	}
	return rows, nil
}

// countText is a limit of runs, "-" for none.
func countText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// keysText is a queue's fairness and per-prefix limits, "-" for none.
func keysText(l flow.QueueLimits) string {
	var parts []string
	if l.Fair {
		parts = append(parts, "fair")
	}
	for _, k := range l.Keys {
		s := k.Prefix + "*: " + countText(k.Concurrency) + " running"
		if !k.Rate.IsZero() {
			s += ", " + k.Rate.String()
		}
		if k.Weight > 0 {
			s += ", weight " + strconv.Itoa(k.Weight)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// limitsForm is the form that sets a queue's limits, filled with what it
// has.
type limitsForm struct {
	Concurrency, KeyConcurrency int
	Rate, KeyRate               string // N/PERIOD, "" for none
	Fair                        bool
	Keys                        string // one PREFIX=CONC[,weight=W][,rate=N/PERIOD] a line
}

func newLimitsForm(l flow.QueueLimits) limitsForm {
	f := limitsForm{Concurrency: l.Concurrency, KeyConcurrency: l.KeyConcurrency, Fair: l.Fair}
	if !l.Rate.IsZero() {
		f.Rate = l.Rate.String()
	}
	if !l.KeyRate.IsZero() {
		f.KeyRate = l.KeyRate.String()
	}
	var lines []string
	for _, k := range l.Keys {
		lines = append(lines, k.String())
	}
	f.Keys = strings.Join(lines, "\n")
	return f
}

// parseLimitsForm reads the limits form; an error names the bad field.
func parseLimitsForm(r *http.Request) (flow.QueueLimits, error) {
	var l flow.QueueLimits
	count := func(name string) (int, error) {
		s := strings.TrimSpace(r.PostFormValue(name))
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s %q: want a number of runs (0 or empty: no limit)", name, s)
		}
		return n, nil
	}
	var err error
	if l.Concurrency, err = count("concurrency"); err != nil {
		return l, err
	}
	if l.KeyConcurrency, err = count("key_concurrency"); err != nil {
		return l, err
	}
	if s := strings.TrimSpace(r.PostFormValue("rate")); s != "" {
		if l.Rate, err = parseRate("rate", s); err != nil {
			return l, err
		}
	}
	if s := strings.TrimSpace(r.PostFormValue("key_rate")); s != "" {
		if l.KeyRate, err = parseRate("key_rate", s); err != nil {
			return l, err
		}
	}
	l.Fair = r.PostFormValue("fair") != ""
	for line := range strings.Lines(r.PostFormValue("keys")) {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		k, err := flow.ParseKeyLimit(line)
		if err != nil {
			return l, err
		}
		l.Keys = append(l.Keys, k)
	}
	return l, nil
}

// parseRate parses the form field's N/PERIOD (flow.ParseRateLimit).
func parseRate(field, s string) (flow.RateLimit, error) {
	r, err := flow.ParseRateLimit(s)
	if err != nil {
		return flow.RateLimit{}, fmt.Errorf("%s: %w", field, err)
	}
	return r, nil
}

// confirmLimits shows the form that sets queue's limits.
func (d *Dashboard) confirmLimits(w http.ResponseWriter, r *http.Request, q string) {
	uses, err := d.e.QueueLimits(r.Context())
	if err != nil {
		d.failErr(w, r, "queue limits", err)
		return
	}
	var l flow.QueueLimits
	if i := slices.IndexFunc(uses, func(u flow.QueueLimitUse) bool { return u.Queue == q }); i >= 0 {
		l = uses[i].Limits
	}
	data := confirmData{Kind: "limits", Queue: q, Limits: newLimitsForm(l), Post: d.path("/queues/" + url.PathEscape(q) + "/limits"), Back: d.path("/")}
	d.render(w, r, http.StatusOK, "confirm", page{Title: "Limits of queue " + q, Nav: "overview", Data: data})
}

// actLimits sets or clears (the clear button) queue's limits.
func (d *Dashboard) actLimits(w http.ResponseWriter, r *http.Request, q string) {
	var l flow.QueueLimits
	if r.PostFormValue("clear") == "" {
		var err error
		if l, err = parseLimitsForm(r); err != nil {
			d.fail(w, r, http.StatusBadRequest, "Limits of queue "+q+" not changed: "+err.Error()+".")
			return
		}
	}
	if err := d.e.SetQueueLimits(r.Context(), q, l); err != nil {
		d.failErr(w, r, "set limits of queue "+q, err)
		return
	}
	d.log.Info("operator action", "action", "set queue limits", "queue", q, "limits", fmt.Sprintf("%+v", l), "remote", r.RemoteAddr)
	http.Redirect(w, r, d.path("/?done=limits"), http.StatusSeeOther)
}

package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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
		rows[i] = limitRow{Queue: u.Queue, Concurrency: countText(l.Concurrency), Rate: rateText(l.Rate),
			KeyConcurrency: countText(l.KeyConcurrency), KeyRate: rateText(l.KeyRate), Keys: keysText(l),
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

// rateText is a rate as N/PERIOD, "-" for none.
func rateText(r flow.RateLimit) string {
	if r.IsZero() {
		return "-"
	}
	return strconv.Itoa(r.Limit) + "/" + r.Period.String()
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
			s += ", " + rateText(k.Rate)
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
		f.Rate = rateText(l.Rate)
	}
	if !l.KeyRate.IsZero() {
		f.KeyRate = rateText(l.KeyRate)
	}
	var lines []string
	for _, k := range l.Keys {
		s := k.Prefix + "=" + strconv.Itoa(k.Concurrency)
		if k.Weight > 0 {
			s += ",weight=" + strconv.Itoa(k.Weight)
		}
		if !k.Rate.IsZero() {
			s += ",rate=" + rateText(k.Rate)
		}
		lines = append(lines, s)
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
		k, err := parseKeyLimit(line)
		if err != nil {
			return l, err
		}
		l.Keys = append(l.Keys, k)
	}
	return l, nil
}

// parseRate parses N/PERIOD (100/1s, 10/m).
func parseRate(field, s string) (flow.RateLimit, error) {
	n, p, found := strings.Cut(s, "/")
	limit, err := strconv.Atoi(n)
	if !found || err != nil || limit <= 0 {
		return flow.RateLimit{}, fmt.Errorf("%s %q: want N/PERIOD with N a positive number, e.g. 100/1s", field, s)
	}
	d, err := time.ParseDuration(p)
	if err != nil {
		d, err = time.ParseDuration("1" + p)
	}
	if err != nil || d < time.Millisecond {
		return flow.RateLimit{}, fmt.Errorf("%s %q: want N/PERIOD with PERIOD a duration of at least 1ms, e.g. 100/1s", field, s)
	}
	return flow.RateLimit{Limit: limit, Period: d}, nil
}

// parseKeyLimit parses PREFIX=CONC[,weight=W][,rate=N/PERIOD].
func parseKeyLimit(s string) (flow.KeyLimit, error) {
	bad := func(why string) (flow.KeyLimit, error) {
		return flow.KeyLimit{}, fmt.Errorf("key limit %q: %s; want PREFIX=CONC[,weight=W][,rate=N/PERIOD]", s, why)
	}
	first, _, _ := strings.Cut(s, ",")
	i := strings.LastIndex(first, "=")
	if i < 0 {
		return bad("no concurrency")
	}
	k := flow.KeyLimit{Prefix: s[:i]}
	if k.Prefix == "" {
		return bad("empty prefix")
	}
	fields := strings.Split(s[i+1:], ",")
	c, err := strconv.Atoi(fields[0])
	if err != nil || c < 0 {
		return bad("concurrency " + strconv.Quote(fields[0]) + " is not a number of runs")
	}
	k.Concurrency = c
	for _, f := range fields[1:] {
		name, v, _ := strings.Cut(f, "=")
		switch name {
		case "weight":
			w, err := strconv.Atoi(v)
			if err != nil || w <= 0 {
				return bad("weight " + strconv.Quote(v) + " is not a positive number")
			}
			k.Weight = w
		case "rate":
			if k.Rate, err = parseRate("rate", v); err != nil {
				return bad(err.Error())
			}
		default:
			return bad("unknown field " + strconv.Quote(f))
		}
	}
	return k, nil
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

package dashboard

import (
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// timeline is the geometry of a run's step timeline, drawn as inline SVG:
// one row per step call, a bar from its start to its end, and below it a
// thinner bar for its compensation, in another colour.
type timeline struct {
	Width, Height int
	Axis          []tick
	Rows          []timelineRow
	Total         string // the span the picture covers
	Empty         bool
}

type tick struct {
	X     int
	Label string
}

type timelineRow struct {
	Y      int    // top of the row
	TextY  int    // baseline of the label
	Label  string // the step for people: "price (2 of 5)" (stepLabels)
	Key    string // the call as recorded: "all0.1/price#0"
	Bars   []bar
	Stripe bool // shade every other row
}

type bar struct {
	X, Y, W, H int
	Class      string // step-completed, comp-failed…
	Title      string // tooltip
	Text       string // duration printed after the bar
	TextX      int
	TextY      int
}

// Layout of the picture, in SVG user units (px).
const (
	tlWidth   = 960
	tlLabelW  = 200 // the step names
	tlRight   = 90  // room for the last duration
	tlRowH    = 34
	tlTop     = 24 // the axis
	tlStepH   = 14
	tlCompH   = 8
	tlMinBarW = 2
)

// compSpan is when a step's compensation ran, from the history.
type compSpan struct {
	start, end time.Time
	attempts   int
}

// buildTimeline lays out the steps of run, taking compensation times from
// its history (steps record only their own start and end). Unfinished bars
// run to now.
func buildTimeline(run flow.RunInfo, events []flow.Event, now time.Time) timeline {
	tl := timeline{Width: tlWidth}
	if len(run.Steps) == 0 {
		tl.Empty = true
		return tl
	}
	comps := make(map[string]*compSpan)
	for _, ev := range events {
		key := fmt.Sprintf("%s#%d", ev.Step, ev.Occurrence)
		switch ev.Kind {
		case flow.EventCompensationStarted:
			c := comps[key]
			if c == nil {
				c = &compSpan{start: ev.At}
				comps[key] = c
			}
			c.attempts++
			c.end = time.Time{}
		case flow.EventCompensationCompleted, flow.EventCompensationFailed, flow.EventCompensationRetried, flow.EventCompensationSkipped:
			if c := comps[key]; c != nil {
				c.end = ev.At
			} else if ev.Kind == flow.EventCompensationSkipped {
				comps[key] = &compSpan{start: ev.At, end: ev.At}
			}
		}
	}

	// The span: from the run's creation to the last thing that happened.
	t0 := run.CreatedAt
	t1 := run.FinishedAt
	if t1.IsZero() {
		t1 = run.UpdatedAt
		if !run.Status.Finished() && run.Status != flow.StatusSuspended {
			t1 = now
		}
	}
	grow := func(t time.Time) {
		if !t.IsZero() && t.After(t1) {
			t1 = t
		}
		if !t.IsZero() && t.Before(t0) {
			t0 = t
		}
	}
	for _, s := range run.Steps {
		grow(s.StartedAt)
		grow(s.FinishedAt)
	}
	for _, c := range comps {
		grow(c.start)
		grow(c.end)
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	plotW := tlWidth - tlLabelW - tlRight
	x := func(t time.Time) int {
		return tlLabelW + int(float64(plotW)*float64(t.Sub(t0))/float64(span))
	}
	barEnd := func(start, end time.Time) time.Time {
		if end.IsZero() {
			if run.Status.Finished() || run.Status == flow.StatusSuspended {
				return run.UpdatedAt
			}
			return t1
		}
		return end
	}

	for i := range 5 {
		at := time.Duration(float64(span) * float64(i) / 4)
		tl.Axis = append(tl.Axis, tick{X: tlLabelW + plotW*i/4, Label: "+" + fmtDur(at)})
	}
	tl.Total = fmtDur(span)

	labels := newStepLabels(run.Steps)
	for i, s := range run.Steps {
		key := fmt.Sprintf("%s#%d", s.Name, s.Occurrence)
		label := labels.Of(s.Name, s.Occurrence)
		y := tlTop + i*tlRowH
		row := timelineRow{Y: y, TextY: y + 18, Label: label, Key: key, Stripe: i%2 == 1}
		end := barEnd(s.StartedAt, s.FinishedAt)
		b := bar{X: x(s.StartedAt), Y: y + 4, H: tlStepH, Class: "step-" + s.Status}
		b.W = max(x(end)-b.X, tlMinBarW)
		d := end.Sub(s.StartedAt)
		b.Text = fmtDur(d)
		if s.FinishedAt.IsZero() {
			b.Text += " (" + s.Status + ")"
		}
		b.Title = fmt.Sprintf("%s: %s, %d attempt(s), %s", label, s.Status, s.Attempts, fmtDur(d))
		if s.Error != "" {
			b.Title += "\n" + trunc(200, s.Error)
		}
		b.TextX, b.TextY = b.X+b.W+4, y+15
		row.Bars = append(row.Bars, b)

		if c := comps[key]; c != nil && s.Compensation != "none" {
			cend := barEnd(c.start, c.end)
			cb := bar{X: x(c.start), Y: y + 4 + tlStepH + 2, H: tlCompH, Class: "comp-" + s.Compensation}
			cb.W = max(x(cend)-cb.X, tlMinBarW)
			cd := cend.Sub(c.start)
			cb.Title = fmt.Sprintf("compensation of %s: %s, %d attempt(s), %s", label, s.Compensation, s.CompensationAttempts, fmtDur(cd))
			if s.CompensationError != "" {
				cb.Title += "\n" + trunc(200, s.CompensationError)
			}
			cb.Text = "↩ " + fmtDur(cd)
			cb.TextX, cb.TextY = cb.X+cb.W+4, cb.Y+cb.H
			// The step's own label may sit where the compensation's goes.
			if cb.TextX < b.TextX+len(b.Text)*7 && cb.Y-b.Y < 12 {
				cb.TextY += 4
			}
			row.Bars = append(row.Bars, cb)
		}
		tl.Rows = append(tl.Rows, row)
	}
	tl.Height = tlTop + len(run.Steps)*tlRowH + 8
	return tl
}

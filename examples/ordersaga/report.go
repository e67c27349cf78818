package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow"
)

// outcomeLabels name the settled states in the report, in order.
var outcomeLabels = []struct {
	status flow.RunStatus
	label  string
}{
	{flow.StatusCompleted, "completed"},
	{flow.StatusFailed, "rolled back"},
	{flow.StatusSuspended, "suspended"},
}

// printReport writes the summary, the services' state and the timelines.
func printReport(w io.Writer, out *outcome) {
	fmt.Fprintf(w, "\n%s settled in %dms.\n\n", plural(len(out.results), "run"), out.elapsed.Milliseconds())
	printOutcomes(w, out)
	printFailures(w, out)
	printServices(w, out)
	for _, tl := range out.timelines {
		printTimeline(w, tl)
	}
}

func printOutcomes(w io.Writer, out *outcome) {
	fromResults := make(map[flow.RunStatus]int)
	for _, r := range out.results {
		fromResults[r.Status]++
	}
	rows := [][]string{{"outcome", "Engine.CountRuns", "Run.Result"}}
	for _, l := range outcomeLabels {
		rows = append(rows, []string{l.label, fmt.Sprint(out.engine[l.status]), fmt.Sprint(fromResults[l.status])})
	}
	for st, n := range out.engine { // anything unsettled would be a bug
		if st != flow.StatusCompleted && st != flow.StatusFailed && st != flow.StatusSuspended && n > 0 {
			rows = append(rows, []string{string(st), fmt.Sprint(n), "-"})
		}
	}
	fmt.Fprintln(w, "Runs by outcome")
	writeTable(w, "lrr", rows)
}

func printFailures(w io.Writer, out *outcome) {
	var suspended, rolledBack []string
	for _, r := range out.results {
		var s *flow.SuspendedError
		var rb *flow.RolledBackError
		switch {
		case errors.As(r.Err, &s):
			suspended = append(suspended, fmt.Sprintf("  %s  %s", r.Order.ID, s.Reason))
		case errors.As(r.Err, &rb):
			rolledBack = append(rolledBack, fmt.Sprintf("  %s  %s", r.Order.ID, rb.Cause))
		}
	}
	if len(suspended) > 0 {
		fmt.Fprintln(w, "\nSuspended, waiting for an operator to resume, skip or cancel (reason):")
		writeLines(w, suspended)
	}
	if len(rolledBack) > 0 {
		fmt.Fprintln(w, "\nRolled back (the workflow's error):")
		writeLines(w, rolledBack)
	}
}

// writeLines writes the first lines of a list and says how many it left out.
func writeLines(w io.Writer, lines []string) {
	const most = 8
	for i, l := range lines {
		if i == most && len(lines) > most+1 {
			fmt.Fprintf(w, "  … and %d more\n", len(lines)-most)
			break
		}
		fmt.Fprintln(w, l)
	}
}

func printServices(w io.Writer, out *outcome) {
	inv, pay, ship := out.svc.inventory, out.svc.payments, out.svc.shipping

	// Units each warehouse should miss: those of completed orders (sold) and
	// those still held by suspended runs (their release failed).
	sold, stuck := make(map[string]int), make(map[string]int)
	for _, r := range out.results {
		switch r.Status {
		case flow.StatusCompleted:
			sold[r.Order.Warehouse] += r.Order.Units
		case flow.StatusSuspended:
			if h, ok := inv.Holding(r.Order.ID); ok {
				stuck[h.Warehouse] += h.Units
			}
		}
	}
	fmt.Fprintln(w, "\nInventory (units)")
	rows := [][]string{{"warehouse", "start", "sold", "held by suspended", "end", "expected end"}}
	for _, s := range inv.Stock() {
		want := s.Initial - sold[s.Warehouse] - stuck[s.Warehouse]
		rows = append(rows, []string{s.Warehouse, fmt.Sprint(s.Initial), fmt.Sprint(sold[s.Warehouse]),
			fmt.Sprint(stuck[s.Warehouse]), fmt.Sprint(s.Shelf), fmt.Sprint(want)})
	}
	writeTable(w, "lrrrrr", rows)

	type money struct {
		orders                  int
		charged, refunded, want int64
	}
	byStatus := make(map[flow.RunStatus]*money)
	for _, l := range outcomeLabels {
		byStatus[l.status] = &money{}
	}
	for _, r := range out.results {
		m := byStatus[r.Status]
		c, rf := pay.Totals(r.Order.ID)
		m.orders++
		m.charged += c
		m.refunded += rf
		if r.Status == flow.StatusCompleted {
			m.want += r.Order.Cents
		}
	}
	fmt.Fprintln(w, "\nPayments ledger")
	rows = [][]string{{"orders", "count", "charged", "refunded", "net", "expected net"}}
	for _, l := range outcomeLabels {
		m := byStatus[l.status]
		rows = append(rows, []string{l.label, fmt.Sprint(m.orders),
			dollars(m.charged), dollars(m.refunded), dollars(m.charged - m.refunded), dollars(m.want)})
	}
	writeTable(w, "lrrrrr", rows)

	fmt.Fprintf(w, "\nShipping: %s handed to the carrier.\n", plural(ship.Count(), "parcel"))

	if problems := out.check(); len(problems) > 0 {
		fmt.Fprintf(w, "\nConsistency: %d PROBLEM(S)\n  %s\n", len(problems), strings.Join(problems, "\n  "))
		return
	}
	fmt.Fprintln(w, "\nConsistency: OK: every completed order holds its stock, is charged once and")
	fmt.Fprintln(w, "shipped; every rolled back order has its stock back, no net charge and no parcel;")
	fmt.Fprintln(w, "every suspended order has no net charge and keeps the stock it could not release.")
}

// check compares the simulated services with what the engine reported and
// returns every disagreement.
func (out *outcome) check() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	inv, pay, ship := out.svc.inventory, out.svc.payments, out.svc.shipping

	counts := make(map[flow.RunStatus]int64)
	for _, r := range out.results {
		counts[r.Status]++
	}
	var total int64
	for st, n := range out.engine {
		total += n
		if n != counts[st] {
			add("Engine.CountRuns says %d %s runs, Run.Result says %d", n, st, counts[st])
		}
	}
	if total != int64(len(out.results)) {
		add("Engine.CountRuns counts %d runs, %d were started", total, len(out.results))
	}

	held := make(map[string]int) // units per warehouse held by orders
	for _, r := range out.results {
		o := r.Order
		h, holds := inv.Holding(o.ID)
		if holds {
			held[h.Warehouse] += h.Units
		}
		charged, refunded := pay.Totals(o.ID)
		net := charged - refunded
		shipped := ship.Shipped(o.ID)
		switch r.Status {
		case flow.StatusCompleted:
			if !holds || h.Units != o.Units {
				add("%s completed but holds no stock", o.ID)
			}
			if net != o.Cents || refunded != 0 {
				add("%s completed: net charge %s, want %s", o.ID, dollars(net), dollars(o.Cents))
			}
			if !shipped {
				add("%s completed but was not shipped", o.ID)
			}
		case flow.StatusFailed:
			if holds {
				add("%s rolled back but still holds %d × %s at %s", o.ID, h.Units, h.SKU, h.Warehouse)
			}
			if net != 0 {
				add("%s rolled back with a net charge of %s", o.ID, dollars(net))
			}
			if shipped {
				add("%s rolled back but was shipped", o.ID)
			}
		case flow.StatusSuspended:
			if net != 0 {
				add("%s suspended with a net charge of %s", o.ID, dollars(net))
			}
			if !holds {
				add("%s suspended but its stock was released", o.ID)
			}
			if shipped {
				add("%s suspended but was shipped", o.ID)
			}
		}
	}
	for _, s := range inv.Stock() {
		if s.Shelf+held[s.Warehouse] != s.Initial {
			add("%s: %d units on the shelf + %d held != %d at start", s.Warehouse, s.Shelf, held[s.Warehouse], s.Initial)
		}
	}
	return problems
}

// printTimeline prints a run's history, one event a line, times relative to
// the run's first event.
func printTimeline(w io.Writer, tl timeline) {
	fmt.Fprintf(w, "\nTimeline of %s, %s (Engine.Inspect, Engine.History)\n", tl.Run.ID, tl.Why)
	fmt.Fprintf(w, "  status: %s\n", tl.Run.Status)
	if tl.Run.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", tl.Run.Reason)
	}
	rows := [][]string{{"step", "status", "tries", "compensation", "tries"}}
	for _, s := range tl.Run.Steps {
		comp, compAttempts := s.Compensation, ""
		if comp == "none" {
			comp = "-"
		}
		if s.CompensationAttempts > 0 {
			compAttempts = fmt.Sprint(s.CompensationAttempts)
		}
		rows = append(rows, []string{s.Name, s.Status, fmt.Sprint(s.Attempts), comp, compAttempts})
	}
	writeTable(w, "llrlr", rows)
	if len(tl.Events) == 0 {
		return
	}
	start := tl.Events[0].At
	rows = [][]string{{"+ms", "event", "step", "try", "detail"}}
	for _, ev := range tl.Events {
		try := ""
		if ev.Attempt > 0 {
			try = fmt.Sprint(ev.Attempt)
		}
		rows = append(rows, []string{fmt.Sprint(ev.At.Sub(start).Milliseconds()), ev.Kind, ev.Step, try, ev.Detail})
	}
	writeTable(w, "rllrl", rows)
}

// writeTable writes rows as columns two spaces apart, indented by two; align
// has an l (left) or r (right) per column. Trailing blanks are trimmed.
func writeTable(w io.Writer, align string, rows [][]string) {
	widths := make([]int, len(align))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		b.Reset()
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			b.WriteString("  ")
			if align[i] == 'r' {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// plural returns "1 run", "2 runs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// dollars formats cents as $1234.50.
func dollars(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow"
)

// printReport writes the managers' actions, the expenses' outcomes, the
// services' state and the timelines.
func printReport(w io.Writer, out *outcome) {
	fmt.Fprintf(w, "\n%d simulated hours passed in %dms of real time; times below are since %s UTC.\n",
		int(storyEnd.Hours()), out.elapsed.Milliseconds(), simStart.Format("Mon 2006-01-02 15:04"))
	printActions(w, out)
	printExpenses(w, out)
	printOutcomes(w, out)
	printServices(w, out)
	for _, tl := range out.timelines {
		printTimeline(w, tl)
	}
	printConsistency(w, out)
}

func printActions(w io.Writer, out *outcome) {
	fmt.Fprintln(w, "\nManagers' decisions (flow.Signal)")
	rows := [][]string{{"at", "manager", "expense", "decision", "signal"}}
	sent := make(map[string]int) // signal_sent events per expense and key
	for _, r := range out.results {
		for _, ev := range r.Events {
			if ev.Kind == flow.EventSignalSent {
				sent[r.Expense.ID+" "+ev.Detail]++
			}
		}
	}
	clicks := make(map[string]int) // accepted sends per expense and key
	for _, a := range out.actions {
		verdict := "accepted"
		k := a.Expense + " signal " + decisionSignal + ", key " + a.Key
		switch {
		case a.Err != nil:
			verdict = "refused: " + a.Err.Error()
		default:
			clicks[k]++
			if clicks[k] > sent[k] {
				verdict = fmt.Sprintf("accepted, dropped: same key (History: %d signal_sent)", sent[k])
			}
		}
		decision := "approve"
		if !a.Decision.Approved {
			decision = "reject: " + a.Decision.Note
		}
		rows = append(rows, []string{since(simStart.Add(a.At)), a.Decision.By, a.Expense, decision, verdict})
	}
	writeTable(w, "rllll", rows)
	fmt.Fprintln(w, "  nina never answers exp-003.")
}

func printExpenses(w io.Writer, out *outcome) {
	fmt.Fprintln(w, "\nExpenses (Run.Result)")
	rows := [][]string{{"expense", "employee", "amount", "manager", "outcome", "at", "detail"}}
	for _, r := range out.results {
		x := r.Expense
		outcome, detail := "paid", fmt.Sprintf("%s, approved by %s", r.Payout.TransferID, r.Payout.ApprovedBy)
		var rb *flow.RolledBackError
		if errors.As(r.Err, &rb) {
			outcome, detail = "rolled back", rb.Cause
		}
		rows = append(rows, []string{x.ID, x.Employee, euros(x.Cents), x.Manager, outcome, since(r.Run.FinishedAt), detail})
	}
	writeTable(w, "llrllrl", rows)
}

func printOutcomes(w io.Writer, out *outcome) {
	fromResults := make(map[flow.RunStatus]int)
	for _, r := range out.results {
		fromResults[r.Status]++
	}
	fmt.Fprintln(w, "\nRuns by outcome")
	rows := [][]string{{"outcome", "Engine.CountRuns", "Run.Result"}}
	for _, l := range []struct {
		st    flow.RunStatus
		label string
	}{{flow.StatusCompleted, "paid"}, {flow.StatusFailed, "rolled back"}} {
		rows = append(rows, []string{l.label, fmt.Sprint(out.engine[l.st]), fmt.Sprint(fromResults[l.st])})
	}
	for st, n := range out.engine { // anything else would be a bug
		if st != flow.StatusCompleted && st != flow.StatusFailed && n > 0 {
			rows = append(rows, []string{string(st), fmt.Sprint(n), "-"})
		}
	}
	writeTable(w, "lrr", rows)
}

func printServices(w io.Writer, out *outcome) {
	fmt.Fprintln(w, "\nBudgets")
	rows := [][]string{{"department", "limit", "reserved", "left", "paid expenses"}}
	for _, d := range out.svc.budget.Departments() {
		rows = append(rows, []string{d.Department, euros(d.Limit), euros(d.Used), euros(d.Limit - d.Used), fmt.Sprint(d.Reservations)})
	}
	writeTable(w, "lrrrr", rows)
	var n int
	var total int64
	for _, r := range out.results {
		if t, ok := out.svc.bank.Paid(r.Expense.ID); ok {
			n++
			total += t.Cents
		}
	}
	fmt.Fprintf(w, "\nBank: %d transfers, %s in total.\n", n, euros(total))
}

// printTimeline prints a run's steps and history, times since simStart.
func printTimeline(w io.Writer, tl timeline) {
	fmt.Fprintf(w, "\nTimeline of %s, %s (Engine.Inspect, Engine.History)\n", tl.Run.ID, tl.Why)
	rows := [][]string{{"step", "status", "tries", "compensation"}}
	for _, s := range tl.Run.Steps {
		comp := s.Compensation
		if comp == "none" {
			comp = "-"
		}
		rows = append(rows, []string{s.Name, s.Status, fmt.Sprint(s.Attempts), comp})
	}
	writeTable(w, "llrl", rows)
	rows = [][]string{{"at", "event", "step", "try", "detail"}}
	for _, ev := range tl.Events {
		try := ""
		if ev.Attempt > 0 {
			try = fmt.Sprint(ev.Attempt)
		}
		rows = append(rows, []string{since(ev.At), ev.Kind, ev.Step, try, ev.Detail})
	}
	writeTable(w, "rllrl", rows)
}

func printConsistency(w io.Writer, out *outcome) {
	if problems := out.check(); len(problems) > 0 {
		fmt.Fprintf(w, "\nConsistency: %d PROBLEM(S)\n  %s\n", len(problems), strings.Join(problems, "\n  "))
		return
	}
	fmt.Fprintln(w, "\nConsistency: OK: every paid expense holds its budget, was paid once and its")
	fmt.Fprintln(w, "task decided; every rolled back expense holds no budget, was never paid, and")
	fmt.Fprintln(w, "its task, if any, is decided or withdrawn; no task is left open.")
}

// check compares the simulated services with what the engine reported and
// returns every disagreement.
func (out *outcome) check() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
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
	b, bank, in := out.svc.budget, out.svc.bank, out.svc.inbox
	for _, r := range out.results {
		x := r.Expense
		t, paid := bank.Paid(x.ID)
		tasks := in.Tasks(x.ID)
		if len(tasks) > 1 {
			add("%s has %d tasks, want at most one", x.ID, len(tasks))
		}
		for id, st := range tasks {
			if st == taskOpen {
				add("%s: task %s is still open", x.ID, id)
			}
		}
		switch r.Status {
		case flow.StatusCompleted:
			if !b.Holds(x.ID) {
				add("%s was paid but holds no budget", x.ID)
			}
			if !paid || t.Cents != x.Cents || r.Payout.TransferID != t.ID || r.Payout.Cents != x.Cents {
				add("%s: paid %v (%+v), payout %+v", x.ID, paid, t, r.Payout)
			}
			for id, st := range tasks {
				if st != taskDecided {
					add("%s was paid but its task %s is %s", x.ID, id, st)
				}
			}
		case flow.StatusFailed:
			if b.Holds(x.ID) {
				add("%s was rolled back but still holds budget", x.ID)
			}
			if paid {
				add("%s was rolled back but paid", x.ID)
			}
			reserved := len(tasks) > 0 // the task comes after the reservation
			if reserved && b.Released(x.ID) != 1 {
				add("%s: budget released %d times, want once", x.ID, b.Released(x.ID))
			}
		}
	}
	return problems
}

// since formats a simulated instant as the time since simStart: +47h30m.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(simStart).Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case s != 0:
		return fmt.Sprintf("+%dh%02dm%02ds", h, m, s)
	case d == 0:
		return "+0"
	}
	return fmt.Sprintf("+%dh%02dm", h, m)
}

// euros formats cents as €1,850.00.
func euros(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	whole := fmt.Sprint(cents / 100)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return fmt.Sprintf("%s€%s.%02d", sign, whole, cents%100)
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

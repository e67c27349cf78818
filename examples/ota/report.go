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

// finalStates name the columns of the device table, in order.
var finalStates = []string{stateUpdated, stateRolledBack, stateFailed, stateReverted, stateCancelled, stateNotReached}

// printReport writes the verdict, the devices per wave, the retries, the
// waves' timeline and a few devices' histories.
func printReport(w io.Writer, out *outcome) {
	fmt.Fprintln(w)
	var rb *flow.RolledBackError
	switch {
	case out.err == nil:
		fmt.Fprintf(w, "Rollout completed: %s waves passed their health gate.\n", count(len(out.summary.Waves)))
	case errors.As(out.err, &rb):
		fmt.Fprintf(w, "Rollout HALTED and rolled back: %s\n", rb.Cause)
	case errors.Is(out.err, flow.ErrCancelled):
		fmt.Fprintln(w, "Rollout CANCELLED by the operator, and rolled back.")
	default:
		fmt.Fprintf(w, "Rollout ended with an error: %v\n", out.err)
	}
	fmt.Fprintf(w, "Took %dms of real time for %s of simulated time.\n", out.elapsed.Milliseconds(), simDuration(out.simulated))
	printDevices(w, out)
	printRetries(w, out)
	printWaves(w, out)
	for _, tr := range out.traces {
		printTrace(w, tr)
	}
	printConsistency(w, out)
}

func printDevices(w io.Writer, out *outcome) {
	fmt.Fprintln(w, "\nDevices by wave and final state")
	var states []string // the cancelled column only when a batch was cancelled
	cancelled := false
	for _, d := range out.devices {
		cancelled = cancelled || d.Final == stateCancelled
	}
	for _, st := range finalStates {
		if st != stateCancelled || cancelled {
			states = append(states, st)
		}
	}
	rows := [][]string{append([]string{"wave", "devices", "batches"}, states...)}
	total := waveOutcome{States: make(map[string]int)}
	for _, wo := range out.waves {
		row := []string{wo.Wave.Name, count(wo.Devices), count(wo.Batches)}
		for _, st := range states {
			row = append(row, count(wo.States[st]))
			total.States[st] += wo.States[st]
		}
		total.Devices += wo.Devices
		total.Batches += wo.Batches
		rows = append(rows, row)
	}
	row := []string{"total", count(total.Devices), count(total.Batches)}
	for _, st := range states {
		row = append(row, count(total.States[st]))
	}
	rows = append(rows, row)
	writeTable(w, "lrr"+strings.Repeat("r", len(states)), rows)

	// Why devices failed, grouped by the failing step and message shape.
	reasons := make(map[string]int)
	var order []string
	for _, d := range out.devices {
		if d.Final != stateFailed && d.Final != stateRolledBack {
			continue
		}
		r := d.FailedAt + ": " + genericReason(d.Error)
		if reasons[r] == 0 {
			order = append(order, r)
		}
		reasons[r]++
	}
	if len(order) > 0 {
		fmt.Fprintln(w, "\nWhy devices were rolled back or failed")
		for _, r := range order {
			fmt.Fprintf(w, "  %6s  %s\n", count(reasons[r]), r)
		}
	}
}

// genericReason strips the device ID from a device's error, so that the
// same failure on many devices counts as one reason.
func genericReason(msg string) string {
	fields := strings.Fields(msg)
	for i, f := range fields {
		if strings.HasPrefix(f, "dev-") {
			fields[i] = "<device>"
		}
	}
	return strings.Join(fields, " ")
}

func printRetries(w io.Writer, out *outcome) {
	var downloads, checks int
	for _, d := range out.devices {
		if d.Downloads > 1 {
			downloads++
		}
		if d.Checks > 1 {
			checks++
		}
	}
	fmt.Fprintln(w, "\nRetries (attempts beyond the first, from Engine.Inspect of every batch)")
	writeTable(w, "lrl", [][]string{
		{"download", count(out.retries["download"]), fmt.Sprintf("on %s devices, backoff 1m, 2m, 4m", count(downloads))},
		{"health check", count(out.retries["verify"]), fmt.Sprintf("on %s devices, backoff 2m, 4m", count(checks))},
	})
}

func printWaves(w io.Writer, out *outcome) {
	fmt.Fprintf(w, "\nWaves (simulated time since %s UTC)\n", simStart.Format("Mon 2006-01-02 15:04"))
	rows := [][]string{{"wave", "started", "batches done", "soak", "gate at", "gate"}}
	for _, wo := range out.waves {
		if wo.Report == nil {
			verdict := "not reached"
			if wo.Batches > 0 {
				verdict = fmt.Sprintf("cancelled with %s batch run(s) in flight", count(wo.Batches))
			}
			rows = append(rows, []string{wo.Wave.Name, "-", "-", "-", "-", verdict})
			continue
		}
		verdict := "pass: "
		if !wo.Gate.Pass {
			verdict = "HALT: "
		}
		rows = append(rows, []string{wo.Wave.Name, since(wo.Report.Started), since(wo.Report.Done),
			simDuration(wo.Wave.Soak), since(wo.GateAt), verdict + wo.Gate.Reason})
	}
	writeTable(w, "lrrrrl", rows)
	for i := len(out.waves) - 1; i >= 0; i-- {
		if wo := out.waves[i]; wo.Reverted {
			fmt.Fprintf(w, "  %s  compensation: wave %s reverted (%s devices back on %s)\n",
				since(wo.RevertedAt), wo.Wave.Name, count(wo.States[stateReverted]), oldFirmware)
		}
	}
	verdict := "completed"
	switch {
	case errors.Is(out.err, flow.ErrCancelled):
		verdict = "cancelled"
	case out.err != nil:
		verdict = "rolled back"
	}
	fmt.Fprintf(w, "  %s  rollout %s\n", since(out.rollout.FinishedAt), verdict)
}

// printTrace prints a device's history, times relative to its batch's
// first event.
func printTrace(w io.Writer, tr trace) {
	d := tr.Device
	fmt.Fprintf(w, "\nHistory of %s, %s (wave %s, run %s, branch %d)\n", d.Device, tr.Why, d.Wave, d.Batch, d.Index)
	rows := [][]string{{"at", "event", "step", "try", "detail"}}
	for _, ev := range tr.Events {
		_, name := splitScope(ev.Step)
		try := ""
		if ev.Attempt > 0 {
			try = fmt.Sprint(ev.Attempt)
		}
		rows = append(rows, []string{since(ev.At), ev.Kind, name, try, ev.Detail})
	}
	writeTable(w, "rllrl", rows)
}

func printConsistency(w io.Writer, out *outcome) {
	if problems := out.check(); len(problems) > 0 {
		const most = 10
		fmt.Fprintf(w, "\nConsistency: %d PROBLEM(S)\n", len(problems))
		for i, p := range problems {
			if i == most {
				fmt.Fprintf(w, "  … and %d more\n", len(problems)-most)
				break
			}
			fmt.Fprintln(w, "  "+p)
		}
		return
	}
	fmt.Fprintf(w, "\nConsistency: OK: each of the %s devices is in exactly one final state; the\n", count(out.plan.Devices))
	fmt.Fprintln(w, "simulated fleet agrees with every one (firmware running, registry, rollbacks,")
	fmt.Fprintln(w, "reverts), and the retries the engine recorded equal the calls the devices saw.")
}

// since formats a simulated instant as the time since the rollout began.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + simDuration(t.Sub(simStart))
}

// simDuration formats a duration as 1h07m, 12m30s or 0s.
func simDuration(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0 && s == 0:
		return fmt.Sprintf("%dm", m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// count formats n with thousands separators: 10,000.
func count(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + count(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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

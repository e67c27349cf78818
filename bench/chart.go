package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartSVG draws one bar per scenario and peer: how many times better
// flowlite did (throughput: flowlite ÷ peer; latency: peer ÷ flowlite), on
// a log scale around 1, so a bar to the right is a win and one to the left
// a loss.
func chartSVG(rep report) string {
	type bar struct {
		label string
		adv   float64
	}
	var bars []bar
	for _, s := range rep.Scenarios {
		base := summarize(rep, s, s.Systems[0])
		for _, sys := range s.Systems[1:] {
			peer := summarize(rep, s, sys)
			adv := base.Value / peer.Value
			if s.LowerBetter {
				adv = 1 / adv
			}
			bars = append(bars, bar{label: s.Name + " — vs " + sys, adv: adv})
		}
	}
	const (
		labelW, plotW, rowH, top = 520, 420, 22, 50
		maxLog                   = 3.0 // 1000× either way
	)
	width, height := labelW+plotW+90, top+rowH*len(bars)+40
	mid := float64(labelW) + plotW/2
	x := func(adv float64) float64 {
		l := math.Max(-maxLog, math.Min(maxLog, math.Log10(adv)))
		return mid + l/maxLog*plotW/2
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">flowlite against its peers: times better (median of interleaved rounds; right of 1 = flowlite ahead)</text>`+"\n")
	for _, t := range []float64{0.01, 0.1, 1, 10, 100} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ccc"/>`+"\n", x(t), top-8, x(t), top+rowH*len(bars))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%g×</text>`+"\n", x(t), top-12, t)
	}
	for i, br := range bars {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+15, html.EscapeString(br.label))
		if math.IsNaN(br.adv) || math.IsInf(br.adv, 0) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">n/a</text>`+"\n", mid+4, y+15)
			continue
		}
		x0, x1, color := mid, x(br.adv), "#2b8a3e"
		if br.adv < 1 {
			x0, x1, color = x(br.adv), mid, "#c92a2a"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+3, math.Max(1, x1-x0), rowH-6, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s×</text>`+"\n", math.Max(x0, x1)+4, y+15, fmtNum(br.adv))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", mid, top-8, mid, top+rowH*len(bars))
	b.WriteString("</svg>\n")
	return b.String()
}

package flowdef

import (
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Graph formats.
const (
	FormatDOT     = "dot"
	FormatMermaid = "mermaid"
	FormatSVG     = "svg"
)

// States colours the nodes of a graph by ID; the values are free text
// (the dashboard passes a node's step state: completed, running, failed,
// compensated, skipped…), and nodes without one are drawn plain.
type States map[string]string

// graphNode is a node as drawn: what it does, where it sits.
type graphNode struct {
	id, label string
	needs     []string
	depth     int
}

// layout orders d's nodes by depth (the longest chain of needs before
// them), then by document order, skipping needs that name nothing.
func layout(d *Definition) []graphNode {
	byID := map[string]*Node{}
	for _, n := range d.Steps {
		if n.ID != "" && byID[n.ID] == nil {
			byID[n.ID] = n
		}
	}
	depth := map[string]int{}
	var depthOf func(id string, seen map[string]bool) int
	depthOf = func(id string, seen map[string]bool) int {
		if v, ok := depth[id]; ok {
			return v
		}
		if seen[id] {
			return 0 // a cycle: Validate reports it
		}
		seen[id] = true
		dep := 0
		for _, r := range byID[id].Needs {
			if byID[r.ID] != nil {
				dep = max(dep, depthOf(r.ID, seen)+1)
			}
		}
		depth[id] = dep
		return dep
	}
	var out []graphNode
	for _, n := range d.Steps {
		if n.ID == "" || byID[n.ID] != n {
			continue
		}
		g := graphNode{id: n.ID, label: nodeLabel(n), depth: depthOf(n.ID, map[string]bool{})}
		for _, r := range n.Needs {
			if byID[r.ID] != nil {
				g.needs = append(g.needs, r.ID)
			}
		}
		out = append(out, g)
	}
	slices.SortStableFunc(out, func(a, b graphNode) int { return a.depth - b.depth })
	return out
}

func nodeLabel(n *Node) string {
	var what string
	switch n.Kind() {
	case "sleep":
		what = "sleep " + n.Sleep.String()
	case "receive":
		what = "receive " + n.Receive.Signal
	case "call":
		what = "call " + n.Call.Workflow
		if n.Call.Version > 0 {
			what += " v" + strconv.Itoa(n.Call.Version)
		}
	default:
		what = n.Uses
	}
	if n.ForEach != nil {
		what += " ×each"
	}
	if n.If != nil {
		what += " (if)"
	}
	return n.ID + "\n" + what
}

// Graph renders d's DAG as DOT, Mermaid or SVG, nodes coloured by states
// (may be nil).
func Graph(d *Definition, format string, states States) (string, error) {
	nodes := layout(d)
	switch format {
	case FormatDOT:
		return dot(d, nodes, states), nil
	case FormatMermaid:
		return mermaid(nodes, states), nil
	case FormatSVG:
		return SVG(d, states), nil
	}
	return "", fmt.Errorf("graph format %q: want %s, %s or %s", format, FormatDOT, FormatMermaid, FormatSVG)
}

// stateColors are the fills of node states, shared by every format.
var stateColors = map[string]string{
	"completed":    "#c8e6c9",
	"running":      "#bbdefb",
	"waiting":      "#fff9c4",
	"pending":      "#eeeeee",
	"failed":       "#ffcdd2",
	"compensated":  "#ffe0b2",
	"compensating": "#ffe0b2",
	"skipped":      "#f5f5f5",
}

func fill(state string) string {
	if c, ok := stateColors[state]; ok {
		return c
	}
	return "#ffffff"
}

func dot(d *Definition, nodes []graphNode, states States) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", strconv.Quote(fmt.Sprintf("%s@%d", d.Name, d.Version)))
	b.WriteString("  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"sans-serif\"];\n")
	for _, n := range nodes {
		label := n.label
		attrs := ""
		if s := states[n.id]; s != "" {
			label += "\n" + s
			attrs = fmt.Sprintf(", fillcolor=%s", strconv.Quote(fill(s)))
		}
		fmt.Fprintf(&b, "  %s [label=%s%s];\n", strconv.Quote(n.id), strconv.Quote(label), attrs)
	}
	for _, n := range nodes {
		for _, need := range n.needs {
			fmt.Fprintf(&b, "  %s -> %s;\n", strconv.Quote(need), strconv.Quote(n.id))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func mermaid(nodes []graphNode, states States) string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	for _, n := range nodes {
		label := n.label
		if s := states[n.id]; s != "" {
			label += "\n" + s
		}
		label = strings.ReplaceAll(html.EscapeString(label), "\n", "<br/>")
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", n.id, strings.ReplaceAll(label, `"`, "&quot;"))
	}
	for _, n := range nodes {
		for _, need := range n.needs {
			fmt.Fprintf(&b, "  %s --> %s\n", need, n.id)
		}
	}
	used := map[string][]string{}
	for _, n := range nodes {
		if s := states[n.id]; s != "" {
			used[s] = append(used[s], n.id)
		}
	}
	names := make([]string, 0, len(used))
	for s := range used {
		names = append(names, s)
	}
	slices.Sort(names)
	for i, s := range names {
		fmt.Fprintf(&b, "  classDef s%d fill:%s\n  class %s s%d\n", i, fill(s), strings.Join(used[s], ","), i)
	}
	return b.String()
}

// SVG draws d's DAG as a standalone SVG picture: one column per depth,
// edges from each need to its dependent, nodes coloured by states. It
// needs no external tool, so the dashboard and `flowlite def graph` use
// it as they are.
func SVG(d *Definition, states States) string {
	const (
		minBoxW    = 170
		gapX, gapY = 50, 18
		pad        = 12
		lineH      = 16
		charW      = 7 // an average character of the 12px font, bold a little wider
	)
	nodes := layout(d)
	// Each node's lines: its label, then its state on a line of its own, so
	// that no label is cut ("price ×each · completed" used to be); every
	// box is as wide as the longest line and as tall as the most lines.
	nodeLines := make(map[string][]string, len(nodes))
	boxW, most := minBoxW, 0
	for _, n := range nodes {
		lines := strings.Split(n.label, "\n")
		if state := states[n.id]; state != "" {
			lines = append(lines, state)
		}
		for _, line := range lines {
			boxW = max(boxW, 16+utf8.RuneCountInString(line)*charW+charW)
		}
		most = max(most, len(lines))
		nodeLines[n.id] = lines
	}
	boxH := 16 + most*lineH
	rows := map[int]int{}
	pos := map[string][2]int{}
	maxDepth, maxRows := 0, 0
	for _, n := range nodes {
		r := rows[n.depth]
		rows[n.depth]++
		x := pad + n.depth*(boxW+gapX)
		y := pad + r*(boxH+gapY)
		pos[n.id] = [2]int{x, y}
		maxDepth = max(maxDepth, n.depth)
		maxRows = max(maxRows, r+1)
	}
	w := 2*pad + (maxDepth+1)*boxW + maxDepth*gapX
	h := 2*pad + maxRows*boxH + max(maxRows-1, 0)*gapY
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(fmt.Sprintf("%s version %d", d.Name, d.Version)))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>` + "\n")
	for _, n := range nodes {
		to := pos[n.id]
		for _, need := range n.needs {
			from := pos[need]
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555" marker-end="url(#arrow)"/>`+"\n",
				from[0]+boxW, from[1]+boxH/2, to[0], to[1]+boxH/2)
		}
	}
	for _, n := range nodes {
		p := pos[n.id]
		state := states[n.id]
		lines := nodeLines[n.id]
		fmt.Fprintf(&b, `<g class="node" data-id="%s" data-state="%s">`, html.EscapeString(n.id), html.EscapeString(state))
		fmt.Fprintf(&b, "<title>%s</title>", html.EscapeString(strings.Join(lines, "\n")))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="#333"/>`, p[0], p[1], boxW, boxH, fill(state))
		for i, line := range lines {
			attrs := ""
			switch {
			case i == 0:
				attrs = ` font-weight="bold"`
			case state != "" && i == len(lines)-1:
				attrs = ` class="state" font-style="italic"`
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d"%s>%s</text>`, p[0]+8, p[1]+18+i*lineH, attrs, html.EscapeString(line))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

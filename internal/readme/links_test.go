package readme

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink is a Markdown link or image: its target, up to a space or the
// closing parenthesis.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdown is what TestLinks reads of one file: its lines outside fenced
// code blocks, and the anchors of its headings.
type markdown struct {
	lines   []string
	lineNos []int
	anchors map[string]bool
}

func readMarkdown(t *testing.T, path string) markdown {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := markdown{anchors: map[string]bool{}}
	inFence := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		md.lines = append(md.lines, line)
		md.lineNos = append(md.lineNos, n)
		if strings.HasPrefix(line, "#") {
			md.anchors[anchor(strings.TrimLeft(line, "# "))] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return md
}

// anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, every other character but letters, digits, hyphens and
// underscores left out.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Waiting, signals, children, fan-out and schedules": "waiting-signals-children-fan-out-and-schedules",
		"What `flowlite backup` is still for":               "what-flowlite-backup-is-still-for",
		"Shards: more cores on one machine":                 "shards-more-cores-on-one-machine",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// Every relative link of README.md and docs/*.md names a file or directory
// that exists, and a fragment on a Markdown file (or on the file itself)
// names one of its headings.
func TestLinks(t *testing.T) {
	t.Parallel()
	files := append([]string{"README.md"}, docFiles(t)...)
	parsed := map[string]markdown{}
	read := func(rel string) markdown {
		if md, ok := parsed[rel]; ok {
			return md
		}
		md := readMarkdown(t, filepath.Join(root, rel))
		parsed[rel] = md
		return md
	}
	links := 0
	for _, rel := range files {
		md := read(rel)
		for i, line := range md.lines {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := rel
				if path != "" {
					dest = filepath.Join(filepath.Dir(rel), path)
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", rel, md.lineNos[i], target, dest)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !read(dest).anchors[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", rel, md.lineNos[i], target, dest, frag)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found: the pattern no longer matches")
	}
}

package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// The command's doc (go doc ./cmd/flowlite) shows every command in its
// synopsis and says that it also works on PostgreSQL: it named a
// "database file" and left out def, copy, reset, fork and others that came
// later.
func TestCommandDocNamesEveryCommand(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	var synopsis strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "\tflowlite ") {
			synopsis.WriteString(line + "\n")
		}
	}
	if synopsis.Len() == 0 {
		t.Fatalf("no synopsis lines in the package doc:\n%s", doc)
	}
	a := &app{}
	for _, c := range a.rootCommand().Commands() {
		name := c.Name()
		if name == "help" || name == "completion" || c.Hidden {
			continue
		}
		if !regexp.MustCompile(`[ |;]` + regexp.QuoteMeta(name) + `([ |;\n])`).MatchString(synopsis.String()) {
			t.Errorf("the synopsis does not show %s:\n%s", name, synopsis.String())
		}
	}
	if first := strings.SplitN(doc, "\n\n", 2)[0]; !strings.Contains(first, "PostgreSQL") || !strings.Contains(first, "SQLite") {
		t.Errorf("the doc's first paragraph %q does not name both backends", first)
	}
}

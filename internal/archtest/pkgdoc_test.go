package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// docPkg is what go list reports about one package of the module for
// TestPackageDocsNameWhatTheyImport.
type docPkg struct {
	ImportPath string
	Dir        string
	Imports    []string
}

// TestPackageDocsNameWhatTheyImport holds each package doc that says what
// its package imports (the convention of DESIGN.md) to what the package
// imports now: every package outside the standard library that its code
// imports must be named, by its path or a part of it ("internal/store",
// "store", "golang.org/x/sync"). A doc that went stale (it named only
// flow/flowsqlite after flow/flowpg existed, or left out a dependency that
// came later) fails it. Docs that say nothing of imports are not checked.
func TestPackageDocsNameWhatTheyImport(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	checked := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p docPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		doc := packageDoc(t, p.Dir)
		if !strings.Contains(doc, "import") {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue // the standard library
			}
			if !namesImport(doc, imp) {
				t.Errorf("the package doc of %s says what it imports but does not name %s", strings.TrimPrefix(p.ImportPath, module+"/"), imp)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d package docs say what their package imports", checked)
	}
}

// packageDoc returns the package comment of the non-test files in dir.
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), dir+"/"+name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			docs = append(docs, f.Doc.Text())
		}
	}
	return strings.Join(docs, "\n")
}

// namesImport reports whether doc names the import path imp, as a word:
// two or more of its elements in a row ("internal/store",
// "golang.org/x/sync", "goccy/go-yaml"), or one that says something alone:
// the last of one of the module's packages ("store", not "flow" for
// flow/flowhistory), any but a host, "x" or a major version of another
// module's ("pgx", "goose").
func namesImport(doc, imp string) bool {
	own := strings.HasPrefix(imp, module+"/")
	elems := strings.Split(strings.TrimPrefix(imp, module+"/"), "/")
	var names []string
	for i := range elems {
		for j := i + 1; j <= len(elems); j++ {
			if j-i == 1 && (!alone(elems[i]) || own && i != len(elems)-1) {
				continue
			}
			names = append(names, strings.Join(elems[i:j], "/"))
		}
	}
	for _, n := range names {
		if regexp.MustCompile(`(^|[^A-Za-z0-9_/.-])` + regexp.QuoteMeta(n) + `($|[^A-Za-z0-9_-])`).MatchString(doc) {
			return true
		}
	}
	return false
}

// alone reports whether one element of an import path names something.
func alone(elem string) bool {
	return !strings.Contains(elem, ".") && elem != "x" && elem != "internal" && !regexp.MustCompile(`^v[0-9]+$`).MatchString(elem)
}

// TestFlowDocNamesBothBackends: go doc ./flow said "(or, later, a
// PostgreSQL database)" and named flow/flowsqlite alone long after
// flow/flowpg existed. Each backend package of the module must be named
// by flow's doc, and the doc must not promise what exists.
func TestFlowDocNamesBothBackends(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", module+"/flow")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	doc := packageDoc(t, strings.TrimSpace(string(out)))
	for _, backend := range []string{"flow/flowsqlite", "flow/flowpg"} {
		if !strings.Contains(doc, backend) {
			t.Errorf("flow's package doc does not name %s", backend)
		}
	}
	if strings.Contains(doc, "later, a PostgreSQL") || strings.Contains(doc, "later flow/flowpg") {
		t.Errorf("flow's package doc speaks of PostgreSQL as to come")
	}
}

package flowdef_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with the file path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func definitionFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.yaml", "*.json"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no definitions in %s", dir)
	}
	return files
}

// TestInvalidDefinitionsGolden checks that each invalid definition is
// refused with every problem it has, each at its file:line:column.
func TestInvalidDefinitionsGolden(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t, &recorder{})
	for _, file := range definitionFiles(t, "testdata/invalid") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = flowdef.Load(file, src, cat)
			if err == nil {
				t.Fatal("the definition compiled")
			}
			if !errors.Is(err, flowdef.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var list flowdef.Errors
			if !errors.As(err, &list) {
				t.Fatalf("err %T is not Errors", err)
			}
			for _, p := range list {
				if p.Pos.File != file || p.Pos.Line < 1 || p.Pos.Column < 1 {
					t.Errorf("problem without a position: %+v", p)
				}
			}
			golden(t, file+".golden", err.Error()+"\n")
		})
	}
}

// TestValidDefinitionsGolden checks that each valid definition compiles,
// and pins its ready order.
func TestValidDefinitionsGolden(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t, &recorder{})
	for _, file := range definitionFiles(t, "testdata/valid") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			w, err := flowdef.Load(file, src, cat)
			if err != nil {
				t.Fatalf("load:\n%v", err)
			}
			got := "order: " + strings.Join(w.Order(), " ") + "\n"
			for _, format := range []string{flowdef.FormatDOT, flowdef.FormatMermaid, flowdef.FormatSVG} {
				g, err := flowdef.Graph(w.Definition(), format, flowdef.States{w.Order()[0]: "completed"})
				if err != nil {
					t.Fatal(err)
				}
				got += "\n--- " + format + "\n" + g
			}
			golden(t, file+".golden", got)
		})
	}
}

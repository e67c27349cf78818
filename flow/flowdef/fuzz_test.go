package flowdef_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
)

func addSeeds(f *testing.F) {
	for _, dir := range []string{"testdata/valid", "testdata/invalid"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.*"))
		for _, file := range files {
			if filepath.Ext(file) == ".golden" {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Add([]byte(`{"name":"n","version":1,"steps":[{"id":"a","uses":"echo","input":"1"}]}`))
	f.Add([]byte("name: n\nversion: 1\nsteps:\n  - &a {id: a, uses: echo}\n  - *a\n"))
}

// FuzzParse checks that Parse never panics and that what it accepts has
// the shape it promises; anything wrong is an error.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := flowdef.Parse("fuzz.yaml", src)
		if err != nil {
			if d != nil {
				t.Fatal("a definition with an error")
			}
			return
		}
		if d.Name == "" || d.Version < 1 || len(d.Steps) == 0 {
			t.Fatalf("accepted an incomplete definition: %+v", d)
		}
	})
}

// FuzzValidate checks that validation (parse and compile against the test
// catalog) never panics, whatever the document.
func FuzzValidate(f *testing.F) {
	addSeeds(f)
	cat := testCatalog(f, &recorder{})
	f.Fuzz(func(t *testing.T, src []byte) {
		w, err := flowdef.Load("fuzz.yaml", src, cat)
		if err == nil && len(w.Order()) == 0 {
			t.Fatal("compiled a definition without steps")
		}
	})
}

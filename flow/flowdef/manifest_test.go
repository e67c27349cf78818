package flowdef_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
)

// TestManifestChecksLikeTheCatalog: a catalog rebuilt from its manifest
// (what the CLI gets from a program) reports the same problems for every
// golden definition as the catalog itself, and compiles the valid ones,
// which then cannot run.
func TestManifestChecksLikeTheCatalog(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t, &recorder{})
	m, err := cat.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Steps []struct {
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(m, &shape); err != nil || len(shape.Steps) != 6 || shape.Steps[1].Name != "extract" || shape.Steps[1].Input["type"] != "object" {
		t.Fatalf("manifest %s (%v)", m, err)
	}
	fromManifest, err := flowdef.CatalogFromManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := fromManifest.Manifest()
	if err != nil || string(again) != string(m) {
		t.Errorf("the manifest of a manifest's catalog differs:\n%s\n---\n%s", again, m)
	}
	for _, dir := range []string{"testdata/valid", "testdata/invalid"} {
		for _, file := range definitionFiles(t, dir) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, want := flowdef.Load(file, src, cat)
			_, got := flowdef.Load(file, src, fromManifest)
			if (want == nil) != (got == nil) || (want != nil && want.Error() != got.Error()) {
				t.Errorf("%s:\nwith the catalog:\n%v\nwith its manifest:\n%v", file, want, got)
			}
		}
	}
}

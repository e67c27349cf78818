package flowhistory_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flowlite/flowlite/flow/flowhistory"
)

// FuzzRead: a history file comes from outside (an export, edited or cut
// short), so Read must refuse what it cannot use with an error matching
// ErrFormat, never panic, and a history it accepts must write and read
// back.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	if err := sample().Write(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"flowlite-history","version":1}`))
	f.Add([]byte(`{"format":"flowlite-history","version":2,"run":{"id":"x"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := flowhistory.Read(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, flowhistory.ErrFormat) {
				t.Fatalf("Read refused with %v, which does not match ErrFormat", err)
			}
			return
		}
		var out bytes.Buffer
		if err := h.Write(&out); err != nil {
			t.Fatalf("an accepted history does not write: %v", err)
		}
		if _, err := flowhistory.Read(&out); err != nil {
			t.Fatalf("an accepted history does not read back: %v", err)
		}
	})
}

package codec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// record is a struct of the kinds step values are made of.
type record struct {
	Name  string             `json:"name"`
	N     int                `json:"n"`
	Ok    bool               `json:"ok,omitempty"`
	Tags  []string           `json:"tags"`
	Score map[string]float64 `json:"score"`
	Next  *record            `json:"next,omitempty"`
}

// FuzzDecode feeds Decode stored bytes that may be anything: a row edited
// by hand, a value of another type, a truncated write. Decode must never
// panic, must refuse what is not exactly one JSON value, and what it
// accepts must survive the trip every checkpoint makes (Encode, then
// Decode on replay) unchanged, encoding to the same bytes each time.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","n":1,"tags":["x"]}`, `{"name":"a","extra":1}`, `{"next":{"next":{"n":-3}}}`,
		`{"score":{"p":1e308,"q":-0}}`, `42`, `"text"`, `null`, `[1,2]`, `{"n":1.5}`, `{} {}`, `{"n":`,
		"\"\xff\xfe\"", ` 7 `, `{"NAME":"case"}`, `{"n":99999999999999999999}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip[record](t, data)
		roundTrip[*record](t, data)
		roundTrip[int](t, data)
		roundTrip[string](t, data)
		roundTrip[[]float64](t, data)
		roundTrip[map[string]any](t, data)
		roundTrip[any](t, data)
		_, err := Decode[json.RawMessage](data)
		if valid := json.Valid(data); (err == nil) != valid {
			t.Fatalf("Decode[RawMessage](%q) err = %v, but json.Valid = %v", data, err, valid)
		}
	})
}

// roundTrip checks Decode[T] on data as FuzzDecode says.
func roundTrip[T any](t *testing.T, data []byte) {
	t.Helper()
	v, err := Decode[T](data)
	if err != nil {
		return
	}
	if !json.Valid(data) {
		t.Fatalf("Decode[%s](%q) accepted invalid JSON", TypeName[T](), data)
	}
	enc, err := Encode(v)
	if err != nil {
		t.Fatalf("Encode(%#v), decoded from %q: %v", v, data, err)
	}
	again, err := Decode[T](enc)
	if err != nil {
		t.Fatalf("Decode[%s](%q), the encoding of a decoded value: %v", TypeName[T](), enc, err)
	}
	if !reflect.DeepEqual(v, again) {
		t.Fatalf("Decode[%s]: %#v became %#v after a round trip through %q", TypeName[T](), v, again, enc)
	}
	if enc2, _ := Encode(again); !bytes.Equal(enc, enc2) {
		t.Fatalf("Encode is not stable: %q then %q", enc, enc2)
	}
}

// TestDecodeRefusesWhatIsNotOneValueOfT names each input Decode must refuse,
// on both of its paths: a struct (a json.Decoder) and any other type
// (json.Unmarshal).
func TestDecodeRefusesWhatIsNotOneValueOfT(t *testing.T) {
	refused := []struct {
		name string
		err  func() error
	}{
		{"int, trailing value", func() error { _, err := Decode[int]([]byte("1 2")); return err }},
		{"int, stray bracket", func() error { _, err := Decode[int]([]byte("1]")); return err }},
		{"int, a string", func() error { _, err := Decode[int]([]byte(`"1"`)); return err }},
		{"slice, trailing object", func() error { _, err := Decode[[]int]([]byte("[1] {}")); return err }},
		{"struct, trailing object", func() error { _, err := Decode[record]([]byte(`{"n":1} {}`)); return err }},
		{"struct, stray bracket", func() error { _, err := Decode[record]([]byte(`{"n":1}]`)); return err }},
		{"struct, unknown field", func() error { _, err := Decode[record]([]byte(`{"n":1,"extra":2}`)); return err }},
		{"struct pointer, unknown field", func() error { _, err := Decode[*record]([]byte(`{"extra":2}`)); return err }},
		{"empty input", func() error { _, err := Decode[int](nil); return err }},
	}
	for _, c := range refused {
		if err := c.err(); err == nil {
			t.Errorf("%s: decoded, want an error", c.name)
		}
	}
	if v, err := Decode[int]([]byte(" 42 \n")); err != nil || v != 42 {
		t.Errorf("Decode[int](\" 42 \\n\") = %v, %v; want 42", v, err)
	}
	if v, err := Decode[record]([]byte(`{"n":7} `)); err != nil || v.N != 7 {
		t.Errorf("Decode[record] = %+v, %v; want n 7", v, err)
	}
}

// DecodeTolerant ignores the fields a struct does not have, at any depth,
// and refuses everything else Decode refuses.
func TestDecodeTolerantIgnoresUnknownFieldsOnly(t *testing.T) {
	t.Parallel()
	v, err := DecodeTolerant[record]([]byte(`{"name":"a","extra":1,"next":{"n":2,"added":[true]}}`))
	if err != nil {
		t.Fatalf("unknown fields: %v", err)
	}
	if v.Name != "a" || v.Next == nil || v.Next.N != 2 {
		t.Fatalf("decoded %+v", v)
	}
	for _, bad := range []string{`{"n":1} {}`, `{"n":1}]`, `{"n":"one"}`, ``, `{"n":`} {
		if _, err := DecodeTolerant[record]([]byte(bad)); err == nil {
			t.Errorf("DecodeTolerant(%q) accepted", bad)
		}
	}
}

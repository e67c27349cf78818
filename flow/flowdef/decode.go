package flowdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// decodeStrict decodes one JSON value into a T, refusing unknown struct
// fields and trailing data, as the engine does for stored values.
func decodeStrict[T any](data []byte) (T, error) {
	var v T
	err := decodeInto(data, &v)
	return v, err
}

func decodeInto(data []byte, ptr any) error {
	if len(data) == 0 {
		data = []byte("null")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ptr); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after JSON value at byte %d", dec.InputOffset())
	}
	return nil
}

// decodeAs decodes JSON into a new value of type t.
func decodeAs(data []byte, t reflect.Type) (reflect.Value, error) {
	p := reflect.New(t)
	if err := decodeInto(data, p.Interface()); err != nil {
		return reflect.Value{}, err
	}
	return p.Elem(), nil
}

package storetest

import (
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func runSearchTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunListSearch", testRunListSearch},
	}
}

// testRunListSearch: RunList's search filters (the dashboard's search) by
// ID prefix, error or reason text and a top-level input field match the
// same runs on every adapter, each alone and together.
func testRunListSearch(t *testing.T, s store.Store) {
	withInput := func(id, input string) store.RunInsertParams {
		p := newRun(id)
		p.Input = []byte(input)
		return p
	}
	// The finished runs first: each is claimed as the only ready run.
	insertWithStatus(t, s, withInput("order-3", `{"customer":"Dana"}`), flowtype.StatusFailed)    // error "boom"
	insertWithStatus(t, s, withInput("order-4", `{"customer":"dana"}`), flowtype.StatusSuspended) // reason "needs a person"
	insert(t, s,
		withInput("order-1", `{"customer":"dana","cents":375,"rush":true,"note":null,"tags":["a"]}`),
		withInput("order-2", `{"customer":"eve","cents":3.5,"rush":false}`),
		withInput("invoice-1", `{"customer":"dana"}`),
		withInput("scalar-1", `42`),
		withInput("quoted-1", `"customer"`),
	)

	for _, tt := range []struct {
		name string
		p    store.RunListParams
		want []string
	}{
		{"id prefix", store.RunListParams{IDPrefix: "order-"}, []string{"order-1", "order-2", "order-3", "order-4"}},
		{"id prefix is not a substring", store.RunListParams{IDPrefix: "der"}, nil},
		{"id prefix is exact in case", store.RunListParams{IDPrefix: "Order"}, nil},
		{"error text", store.RunListParams{ErrorText: "BOO"}, []string{"order-3"}},
		{"reason text", store.RunListParams{ErrorText: "a person"}, []string{"order-4"}},
		{"error of the suspended run", store.RunListParams{ErrorText: "compensation"}, []string{"order-4"}},
		{"string field", store.RunListParams{InputField: "customer", InputValue: "dana"}, []string{"invoice-1", "order-1", "order-4"}},
		{"string field is exact", store.RunListParams{InputField: "customer", InputValue: "dan"}, nil},
		{"integer field", store.RunListParams{InputField: "cents", InputValue: "375"}, []string{"order-1"}},
		{"fraction field", store.RunListParams{InputField: "cents", InputValue: "3.5"}, []string{"order-2"}},
		{"true", store.RunListParams{InputField: "rush", InputValue: "true"}, []string{"order-1"}},
		{"false", store.RunListParams{InputField: "rush", InputValue: "false"}, []string{"order-2"}},
		{"null", store.RunListParams{InputField: "note", InputValue: "null"}, []string{"order-1"}},
		{"missing field", store.RunListParams{InputField: "nope", InputValue: "null"}, nil},
		{"all together", store.RunListParams{IDPrefix: "order-", ErrorText: "person", InputField: "customer", InputValue: "dana"}, []string{"order-4"}},
		{"with status", store.RunListParams{Status: flowtype.StatusPending, InputField: "customer", InputValue: "dana"}, []string{"invoice-1", "order-1"}},
	} {
		got, err := s.Reader().RunList(t.Context(), tt.p)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		ids := ids(got)
		slices.Sort(ids)
		if !slices.Equal(ids, tt.want) {
			t.Errorf("%s: runs %v, want %v", tt.name, ids, tt.want)
		}
	}
}

package orderdef_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/examples/orderdef"
	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

func TestOrderDefinition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		customer, address string
		wantErr           error
		wantLog           []string
	}{
		{"alice", "1 alice street", nil, []string{"reserve o-alice", "charge o-alice", "ship o-alice"}},
		{"mallory", "1 mallory street", flow.ErrRolledBack, []string{"reserve o-mallory", "release res-o-mallory"}},
		{"erin", "PO Box 13", flow.ErrRolledBack, []string{"reserve o-erin", "charge o-erin", "refund ch-o-erin", "release res-o-erin"}},
	} {
		t.Run(tc.customer, func(t *testing.T) {
			t.Parallel()
			shop := &orderdef.Shop{}
			cat, err := shop.Catalog()
			if err != nil {
				t.Fatal(err)
			}
			w, err := flowdef.Load("order.json", orderdef.Definition, cat)
			if err != nil {
				t.Fatal(err)
			}
			env := flowtest.New(t, nil)
			out, _, err := flowtest.RunWorkflow(env, w.Flow(), flowdef.Values{
				"id": "o-" + tc.customer, "customer": tc.customer, "address": tc.address, "sku": "lamp", "units": 2, "cents": 9800,
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && (out["tracking"] != "trk-o-alice" || out["cents"] != float64(9800)) {
				t.Errorf("out = %v", out)
			}
			if !slices.Equal(shop.Log, tc.wantLog) {
				t.Errorf("log %v, want %v", shop.Log, tc.wantLog)
			}
		})
	}
}

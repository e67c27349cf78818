package main

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestOrderIsRolledBackWhenTheCardIsDeclined(t *testing.T) {
	env := flowtest.New(t, nil) // temp SQLite file, manual clock, engine started
	env.FailStep("charge_payment", -1, flow.Permanent(errors.New("card declined")))

	_, run, err := flowtest.RunWorkflow(env, placeOrder, order)
	if !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want rolled back", err)
	}
	if got := env.Compensated(run.ID()); !slices.Equal(got, []string{"reserve_inventory"}) {
		t.Fatalf("compensated %v", got)
	}
}

// The compensation reached the inventory: the reservation of the declined
// order was released.
func TestDeclinedOrderReleasesItsReservation(t *testing.T) {
	env := flowtest.New(t, nil)
	env.FailStep("charge_payment", -1, flow.Permanent(errors.New("card declined")))
	o := Order{ID: "8", Items: []string{"desk"}, Total: 9900}
	if _, _, err := flowtest.RunWorkflow(env, placeOrder, o); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want rolled back", err)
	}
	if got := inventory.released.list(); !slices.Contains(got, "res_8") {
		t.Fatalf("released %v, want res_8", got)
	}
}

// main places order 1042 in app.db of the working directory, and the run is
// recorded there as completed with its receipt.
func TestMainPlacesTheOrder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	main()

	ctx := context.Background()
	eng, err := flowsqlite.OpenReadOnly(ctx, filepath.Join(dir, "app.db"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	info, err := eng.Inspect(ctx, "order-1042")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusCompleted {
		t.Fatalf("order-1042 is %s, want completed", info.Status)
	}
}

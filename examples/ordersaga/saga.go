package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Order is the input of one saga run.
type Order struct {
	ID        string `json:"id"`
	Customer  string `json:"customer"`
	Address   string `json:"address"`
	Warehouse string `json:"warehouse"`
	SKU       string `json:"sku"`
	Units     int    `json:"units"`
	Cents     int64  `json:"cents"` // the total price
}

// Receipt is the output of a completed saga run.
type Receipt struct {
	OrderID  string `json:"order_id"`
	ChargeID string `json:"charge_id"`
	Tracking string `json:"tracking"`
	Cents    int64  `json:"cents"`
}

// The catalogue of the story. Orders cycle through the customers and the
// warehouses, so the outcome of every order is known in advance:
//
//   - mallory's card is declined: her orders are rolled back (stock released),
//     except one shipping from oslo, whose stock cannot be released today:
//     that run is suspended for an operator;
//   - trent's first payment attempt times out: retried, then completed;
//   - erin's address is a PO box the carrier refuses: her orders are charged,
//     then refunded and released;
//   - everyone else's orders complete.
var (
	customers   = []string{"alice", "bob", "mallory", "carol", "trent", "dave", "erin"}
	warehouses  = []string{"berlin", "lisbon", "oslo"}
	skus        = []string{"lamp", "chair", "desk", "rug"}
	pricesCents = map[string]int64{"lamp": 4900, "chair": 12900, "desk": 34900, "rug": 8900}
)

// stockPerSKU is the number of units of each SKU every warehouse starts with.
const stockPerSKU = 100

func addressOf(customer string) string {
	if customer == "erin" {
		return "PO Box 13, Atlantis"
	}
	return "1 " + customer + " street"
}

// makeOrders returns n orders, order-001 first.
func makeOrders(n int) []Order {
	orders := make([]Order, n)
	for i := range orders {
		c := customers[i%len(customers)]
		sku := skus[i%len(skus)]
		units := 1 + i%3
		orders[i] = Order{
			ID:        fmt.Sprintf("order-%03d", i+1),
			Customer:  c,
			Address:   addressOf(c),
			Warehouse: warehouses[i%len(warehouses)],
			SKU:       sku,
			Units:     units,
			Cents:     int64(units) * pricesCents[sku],
		}
	}
	return orders
}

// quickRetry keeps the demo fast: three attempts, 20ms then 40ms apart.
var quickRetry = &flow.RetryPolicy{
	MaxAttempts:     3,
	InitialInterval: 20 * time.Millisecond,
	Coefficient:     2,
	MaxInterval:     200 * time.Millisecond,
	Jitter:          0.1,
}

// newOrderSaga returns the workflow reserve → charge → ship over svc. When a
// step fails for good the workflow returns its error, and the engine
// compensates the completed steps in reverse order: refund, then release.
func newOrderSaga(svc *services) flow.Workflow[Order, Receipt] {
	reserve := flow.Step[Order, Reservation]{
		Name: "reserve_inventory",
		Run: func(_ context.Context, o Order) (Reservation, error) {
			r, err := svc.inventory.Reserve(o.ID, o.Warehouse, o.SKU, o.Units)
			if errors.Is(err, errOutOfStock) {
				return r, flow.Permanent(err)
			}
			return r, err
		},
		Compensate: func(_ context.Context, _ Order, r Reservation) error {
			return svc.inventory.Release(r)
		},
		Retry:   quickRetry,
		Timeout: 5 * time.Second,
	}
	charge := flow.Step[Order, Charge]{
		Name: "charge_payment",
		Run: func(_ context.Context, o Order) (Charge, error) {
			c, err := svc.payments.Charge(o.ID, o.Customer, o.Cents)
			if errors.Is(err, errCardDeclined) {
				return c, flow.Permanent(err) // asking again will not help
			}
			return c, err // e.g. a gateway timeout: retried
		},
		Compensate: func(_ context.Context, _ Order, c Charge) error {
			return svc.payments.Refund(c)
		},
		Retry:   quickRetry,
		Timeout: 5 * time.Second,
	}
	ship := flow.Step[Order, Shipment]{
		Name: "ship_order",
		Run: func(_ context.Context, o Order) (Shipment, error) {
			s, err := svc.shipping.Ship(o.ID, o.Address)
			if errors.Is(err, errUndeliverable) {
				return s, flow.Permanent(err)
			}
			return s, err
		},
		// The last step: nothing after it can fail, so it needs no undo.
		Retry:   quickRetry,
		Timeout: 5 * time.Second,
	}
	return flow.Workflow[Order, Receipt]{
		Name: "place_order",
		Run: func(wc flow.Context, o Order) (Receipt, error) {
			if _, err := flow.Do(wc, reserve, o); err != nil {
				return Receipt{}, err
			}
			c, err := flow.Do(wc, charge, o)
			if err != nil {
				return Receipt{}, err
			}
			s, err := flow.Do(wc, ship, o)
			if err != nil {
				return Receipt{}, err
			}
			return Receipt{OrderID: o.ID, ChargeID: c.ID, Tracking: s.Tracking, Cents: c.Cents}, nil
		},
	}
}

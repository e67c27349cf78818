// Package orderdef is the README's order saga (reserve inventory, charge
// the payment, ship) written as a JSON workflow definition, order.json,
// over steps implemented in Go. Its test runs the definition through
// flowtest: a completed order, a declined card rolled back, and a parcel
// the carrier refuses, refunded then released.
package orderdef

import (
	"context"
	_ "embed"
	"errors"
	"strings"
	"sync"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

// Definition is order.json.
//
//go:embed order.json
var Definition []byte

type ReserveInput struct {
	Order string `json:"order"`
	SKU   string `json:"sku"`
	Units int    `json:"units"`
}

type Reservation struct {
	ID string `json:"id"`
}

type ChargeInput struct {
	Order    string `json:"order"`
	Customer string `json:"customer"`
	Cents    int64  `json:"cents"`
}

type Charge struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

type ShipInput struct {
	Order       string `json:"order"`
	Address     string `json:"address"`
	Reservation string `json:"reservation"`
}

type Shipment struct {
	Tracking string `json:"tracking"`
}

// Shop is the pretend inventory, payment provider and carrier. It records
// every effect and its undoing, in order.
type Shop struct {
	mu  sync.Mutex
	Log []string
}

func (s *Shop) note(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Log = append(s.Log, e)
}

// Catalog returns the steps order.json uses, bound to s.
func (s *Shop) Catalog() (*flowdef.Catalog, error) {
	cat := flowdef.NewCatalog()
	err := errors.Join(
		flowdef.AddStep(cat, flow.Step[ReserveInput, Reservation]{
			Name: "reserve_inventory",
			Run: func(ctx context.Context, in ReserveInput) (Reservation, error) {
				s.note("reserve " + in.Order)
				return Reservation{ID: "res-" + in.Order}, nil
			},
			Compensate: func(ctx context.Context, in ReserveInput, r Reservation) error {
				s.note("release " + r.ID)
				return nil
			},
		}),
		flowdef.AddStep(cat, flow.Step[ChargeInput, Charge]{
			Name: "charge_payment",
			Run: func(ctx context.Context, in ChargeInput) (Charge, error) {
				if in.Customer == "mallory" {
					return Charge{}, flow.Permanent(&flow.Error{Code: "card_declined", Message: "card declined"})
				}
				s.note("charge " + in.Order)
				return Charge{ID: "ch-" + in.Order, Cents: in.Cents}, nil
			},
			Compensate: func(ctx context.Context, in ChargeInput, c Charge) error {
				s.note("refund " + c.ID)
				return nil
			},
		}),
		flowdef.AddStep(cat, flow.Step[ShipInput, Shipment]{
			Name: "ship",
			Run: func(ctx context.Context, in ShipInput) (Shipment, error) {
				if strings.HasPrefix(in.Address, "PO Box") {
					return Shipment{}, flow.Permanent(errors.New("carrier refuses PO boxes"))
				}
				s.note("ship " + in.Order)
				return Shipment{Tracking: "trk-" + in.Order}, nil
			},
		}),
	)
	return cat, err
}

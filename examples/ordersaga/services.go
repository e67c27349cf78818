package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// The simulated services live in this process so that the saga's effects,
// and their undoing, can be counted at the end. Each call is idempotent per
// order, as calls from durable steps must be: a step may run again after a
// crash between its effect and its checkpoint.

// Errors the services return. The steps decide which of them are worth
// retrying.
var (
	errOutOfStock    = errors.New("out of stock")
	errCardDeclined  = errors.New("card declined")
	errUndeliverable = errors.New("carrier does not deliver to this address")
)

// services bundles the three simulated systems the saga talks to.
type services struct {
	inventory *inventory
	payments  *payments
	shipping  *shipping
}

// newServices returns the services of the story: stock in three warehouses
// (oslo's system cannot release stock today), mallory's card is declined,
// trent's payments time out on the first try, and the carrier does not
// deliver to erin's PO box.
func newServices(skus []string, warehouses []string, stockPerSKU int) *services {
	return &services{
		inventory: newInventory(warehouses, skus, stockPerSKU, "oslo"),
		payments:  newPayments([]string{"mallory"}, []string{"trent"}),
		shipping:  newShipping([]string{addressOf("erin")}),
	}
}

// stockKey names one SKU in one warehouse.
type stockKey struct{ Warehouse, SKU string }

// Reservation is stock an order holds until it ships or is released.
type Reservation struct {
	OrderID   string `json:"order_id"`
	Warehouse string `json:"warehouse"`
	SKU       string `json:"sku"`
	Units     int    `json:"units"`
}

// inventory counts the units on the shelf per warehouse and SKU, and the
// units each order holds.
type inventory struct {
	mu          sync.Mutex
	initial     map[stockKey]int
	shelf       map[stockKey]int
	held        map[string]Reservation // by order ID
	releaseDown map[string]bool        // warehouses whose release API fails
	releases    map[string]int         // release calls per order, failed ones included
}

func newInventory(warehouses, skus []string, units int, releaseDown ...string) *inventory {
	inv := &inventory{
		initial:     make(map[stockKey]int),
		shelf:       make(map[stockKey]int),
		held:        make(map[string]Reservation),
		releaseDown: make(map[string]bool),
		releases:    make(map[string]int),
	}
	for _, w := range warehouses {
		for _, s := range skus {
			inv.initial[stockKey{w, s}] = units
			inv.shelf[stockKey{w, s}] = units
		}
	}
	for _, w := range releaseDown {
		inv.releaseDown[w] = true
	}
	return inv
}

// Reserve takes units of sku off the shelf of warehouse for an order. A
// second call for the same order returns the first reservation.
func (inv *inventory) Reserve(orderID, warehouse, sku string, units int) (Reservation, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if r, ok := inv.held[orderID]; ok {
		return r, nil
	}
	k := stockKey{warehouse, sku}
	if inv.shelf[k] < units {
		return Reservation{}, fmt.Errorf("reserve %d × %s at %s: %w (%d left)", units, sku, warehouse, errOutOfStock, inv.shelf[k])
	}
	inv.shelf[k] -= units
	r := Reservation{OrderID: orderID, Warehouse: warehouse, SKU: sku, Units: units}
	inv.held[orderID] = r
	return r, nil
}

// Release puts a reservation back on the shelf. Releasing what is not held
// (any more) does nothing.
func (inv *inventory) Release(r Reservation) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.releases[r.OrderID]++
	if inv.releaseDown[r.Warehouse] {
		return fmt.Errorf("release stock at %s: warehouse system unavailable (503)", r.Warehouse)
	}
	if _, ok := inv.held[r.OrderID]; !ok {
		return nil
	}
	inv.shelf[stockKey{r.Warehouse, r.SKU}] += r.Units
	delete(inv.held, r.OrderID)
	return nil
}

// Holding returns the reservation an order holds.
func (inv *inventory) Holding(orderID string) (Reservation, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	r, ok := inv.held[orderID]
	return r, ok
}

// ReleaseCalls returns how often Release was called for an order.
func (inv *inventory) ReleaseCalls(orderID string) int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.releases[orderID]
}

// warehouseStock sums the units of one warehouse.
type warehouseStock struct {
	Warehouse      string
	Initial, Shelf int
}

// Stock returns the units per warehouse, sorted by name.
func (inv *inventory) Stock() []warehouseStock {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	byName := make(map[string]*warehouseStock)
	for k, n := range inv.initial {
		w := byName[k.Warehouse]
		if w == nil {
			w = &warehouseStock{Warehouse: k.Warehouse}
			byName[k.Warehouse] = w
		}
		w.Initial += n
		w.Shelf += inv.shelf[k]
	}
	out := make([]warehouseStock, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// Charge is money taken from a customer's card.
type Charge struct {
	ID      string `json:"id"`
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
}

// ledgerEntry is one movement of money: a charge (positive) or a refund
// (negative).
type ledgerEntry struct {
	OrderID string
	Kind    string // "charge" or "refund"
	Cents   int64
}

// payments keeps an append-only ledger of charges and refunds.
type payments struct {
	mu       sync.Mutex
	declined map[string]bool // customers whose card is declined
	flaky    map[string]bool // customers whose first charge attempt times out
	calls    map[string]int  // charge calls per order
	charges  map[string]Charge
	refunded map[string]bool // charge IDs
	ledger   []ledgerEntry
}

func newPayments(declined, flaky []string) *payments {
	p := &payments{
		declined: make(map[string]bool),
		flaky:    make(map[string]bool),
		calls:    make(map[string]int),
		charges:  make(map[string]Charge),
		refunded: make(map[string]bool),
	}
	for _, c := range declined {
		p.declined[c] = true
	}
	for _, c := range flaky {
		p.flaky[c] = true
	}
	return p
}

// Charge takes cents from the customer's card for an order. A second call
// for a charged order returns the first charge.
func (p *payments) Charge(orderID, customer string, cents int64) (Charge, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[orderID]++
	if c, ok := p.charges[orderID]; ok {
		return c, nil
	}
	if p.declined[customer] {
		return Charge{}, fmt.Errorf("%w (customer %s)", errCardDeclined, customer)
	}
	if p.flaky[customer] && p.calls[orderID] == 1 {
		return Charge{}, errors.New("payment gateway timeout")
	}
	c := Charge{ID: "ch_" + orderID, OrderID: orderID, Cents: cents}
	p.charges[orderID] = c
	p.ledger = append(p.ledger, ledgerEntry{OrderID: orderID, Kind: "charge", Cents: cents})
	return c, nil
}

// Refund gives a charge back. Refunding twice refunds once.
func (p *payments) Refund(c Charge) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refunded[c.ID] {
		return nil
	}
	p.refunded[c.ID] = true
	p.ledger = append(p.ledger, ledgerEntry{OrderID: c.OrderID, Kind: "refund", Cents: -c.Cents})
	return nil
}

// Totals returns what was charged and refunded for an order (refunds as a
// positive amount).
func (p *payments) Totals(orderID string) (charged, refunded int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.ledger {
		if e.OrderID != orderID {
			continue
		}
		if e.Cents > 0 {
			charged += e.Cents
		} else {
			refunded -= e.Cents
		}
	}
	return charged, refunded
}

// ChargeCalls returns how often Charge was called for an order.
func (p *payments) ChargeCalls(orderID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[orderID]
}

// Shipment is a parcel handed to the carrier.
type Shipment struct {
	OrderID  string `json:"order_id"`
	Tracking string `json:"tracking"`
}

// shipping hands parcels to a carrier that skips some addresses.
type shipping struct {
	mu            sync.Mutex
	undeliverable map[string]bool
	shipments     map[string]Shipment // by order ID
}

func newShipping(undeliverable []string) *shipping {
	s := &shipping{undeliverable: make(map[string]bool), shipments: make(map[string]Shipment)}
	for _, a := range undeliverable {
		s.undeliverable[a] = true
	}
	return s
}

// Ship hands an order's parcel to the carrier. Shipping an order twice
// returns the first shipment.
func (s *shipping) Ship(orderID, address string) (Shipment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh, ok := s.shipments[orderID]; ok {
		return sh, nil
	}
	if s.undeliverable[address] {
		return Shipment{}, fmt.Errorf("ship to %q: %w", address, errUndeliverable)
	}
	sh := Shipment{OrderID: orderID, Tracking: "TRK-" + orderID}
	s.shipments[orderID] = sh
	return sh, nil
}

// Shipped reports whether an order was shipped.
func (s *shipping) Shipped(orderID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.shipments[orderID]
	return ok
}

// Count returns the number of shipments.
func (s *shipping) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shipments)
}

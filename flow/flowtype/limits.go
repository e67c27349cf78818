package flowtype

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// QueueLimits is the flow control of one queue, shared by every engine of
// the database (one SQLite file, or one PostgreSQL schema): how many of its
// runs execute at once and how many start per period, in all and per
// concurrency key, and whether claims share the queue fairly between keys.
// The zero value limits nothing.
//
// A run executes while it holds its lease: from its claim until it
// finishes, fails, is cancelled, suspends, waits (a durable sleep, a
// signal, a child) or loses its lease, and a crashed engine's runs hold
// theirs until the rescuer takes it back. So a slot is never held by a run
// that is not executing, and nothing has to give one back. A run held back
// by a limit stays a ready row that holds no worker slot, and starts as
// soon as the limit allows.
type QueueLimits struct {
	// Concurrency is the most runs of the queue executing at once across
	// every engine of the database (0: no limit). Each engine also keeps
	// its own QueueConfig.Concurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// KeyConcurrency is the most runs with the same concurrency key
	// executing at once, for keys no entry of Keys names (0: no limit).
	KeyConcurrency int `json:"keyConcurrency,omitempty"`
	// Rate bounds how many runs of the queue start (are claimed for the
	// first time) in any period of Rate.Period, in all.
	Rate RateLimit `json:"rate,omitzero"`
	// KeyRate is Rate per concurrency key, for keys no entry of Keys names.
	KeyRate RateLimit `json:"keyRate,omitzero"`
	// Fair makes claims take ready runs round-robin across concurrency
	// keys, each key's Weight at a time, so that a key with a huge backlog
	// cannot starve the others; priorities order runs within a key. Claims
	// are fair whenever a per-key limit is set, too.
	Fair bool `json:"fair,omitempty"`
	// Keys sets limits and weights per key prefix: the entry with the
	// longest prefix of a run's key applies to it.
	Keys []KeyLimit `json:"keys,omitempty"`
}

// RateLimit is at most Limit starts in any period of length Period. The
// zero value limits nothing.
type RateLimit struct {
	// Limit is the most starts in any period (0: no limit).
	Limit int `json:"limit,omitempty"`
	// Period is the length of the sliding window the starts are counted
	// in, at least a millisecond.
	Period time.Duration `json:"period,omitempty"`
}

// KeyLimit is the flow control of the concurrency keys starting with
// Prefix (each key on its own, not all of them together).
type KeyLimit struct {
	// Prefix selects the keys the entry applies to; not empty.
	Prefix string `json:"prefix"`
	// Concurrency is the most runs with one such key executing at once (0:
	// no limit, whatever QueueLimits.KeyConcurrency says).
	Concurrency int `json:"concurrency,omitempty"`
	// Rate bounds the starts of runs with one such key.
	Rate RateLimit `json:"rate,omitzero"`
	// Weight is how many runs of one such key a fair claim takes in its
	// turn (0: 1).
	Weight int `json:"weight,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l RateLimit) IsZero() bool { return l.Limit == 0 }

// IsZero reports whether l limits nothing and claims are not fair.
func (l QueueLimits) IsZero() bool {
	return l.Concurrency == 0 && l.KeyConcurrency == 0 && l.Rate.IsZero() && l.KeyRate.IsZero() &&
		!l.Fair && len(l.Keys) == 0
}

// Keyed reports whether claims of the queue go key by key: fair claims, or
// a limit per key.
func (l QueueLimits) Keyed() bool {
	return l.Fair || l.KeyConcurrency > 0 || !l.KeyRate.IsZero() || len(l.Keys) > 0
}

// ForKey returns the limits that apply to the runs with concurrency key
// key: those of the entry of Keys with the longest prefix of key, or the
// queue's defaults (KeyConcurrency, KeyRate, weight 1). Runs without a key
// have no per-key limit.
func (l QueueLimits) ForKey(key string) KeyLimit {
	if key == "" {
		return KeyLimit{Weight: 1}
	}
	best := -1
	for i, k := range l.Keys {
		if strings.HasPrefix(key, k.Prefix) && (best < 0 || len(k.Prefix) > len(l.Keys[best].Prefix)) {
			best = i
		}
	}
	if best < 0 {
		return KeyLimit{Concurrency: l.KeyConcurrency, Rate: l.KeyRate, Weight: 1}
	}
	k := l.Keys[best]
	k.Weight = max(k.Weight, 1)
	return k
}

// LongestPeriod is the longest period of any rate limit in l (0: none), how
// far back the starts of the queue are kept.
func (l QueueLimits) LongestPeriod() time.Duration {
	p := max(l.Rate.Period, l.KeyRate.Period)
	for _, k := range l.Keys {
		p = max(p, k.Rate.Period)
	}
	return p
}

// Validate reports the first thing wrong with l, naming it.
func (l QueueLimits) Validate() error {
	var errs []error
	if l.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("negative Concurrency %d", l.Concurrency))
	}
	if l.KeyConcurrency < 0 {
		errs = append(errs, fmt.Errorf("negative KeyConcurrency %d", l.KeyConcurrency))
	}
	errs = append(errs, l.Rate.validate("Rate"), l.KeyRate.validate("KeyRate"))
	seen := make(map[string]bool, len(l.Keys))
	for i, k := range l.Keys {
		name := fmt.Sprintf("key limit %d (prefix %q)", i, k.Prefix)
		switch {
		case k.Prefix == "":
			errs = append(errs, fmt.Errorf("key limit %d: empty Prefix (KeyConcurrency and KeyRate set the default)", i))
		case seen[k.Prefix]:
			errs = append(errs, fmt.Errorf("%s: prefix listed twice", name))
		}
		seen[k.Prefix] = true
		if k.Concurrency < 0 {
			errs = append(errs, fmt.Errorf("%s: negative Concurrency %d", name, k.Concurrency))
		}
		if k.Weight < 0 {
			errs = append(errs, fmt.Errorf("%s: negative Weight %d", name, k.Weight))
		}
		errs = append(errs, k.Rate.validate(name+": Rate"))
	}
	return errors.Join(errs...)
}

func (l RateLimit) validate(name string) error {
	switch {
	case l.Limit < 0:
		return fmt.Errorf("%s: negative Limit %d", name, l.Limit)
	case l.Limit > 0 && l.Period < time.Millisecond:
		return fmt.Errorf("%s: Limit %d needs a Period of at least 1ms, not %s", name, l.Limit, l.Period)
	case l.Limit == 0 && l.Period != 0:
		return fmt.Errorf("%s: Period %s without a Limit", name, l.Period)
	}
	return nil
}

// QueueLimitUse is what a queue's limits hold at one moment, for operators
// (Engine.QueueLimits, flowlite queues, the dashboard, /metrics).
type QueueLimitUse struct {
	// Queue is the queue's name.
	Queue string
	// Limits are the queue's limits.
	Limits QueueLimits
	// Running counts the runs of the queue executing now (leased).
	Running int
	// RunningByKey counts the runs executing now per concurrency key, for
	// the keys that have some.
	RunningByKey map[string]int
	// Started counts the runs started within Limits.Rate.Period (0 without
	// a rate).
	Started int
	// Ready counts the runs ready to start (unleased and due).
	Ready int
	// HeldBack counts the ready runs the queue's global limits (Concurrency
	// and Rate) keep from starting now; runs held back by a per-key limit
	// alone are not counted.
	HeldBack int
}

// String is the rate as ParseRateLimit reads it, N/PERIOD ("100/1s"), or
// "-" when it limits nothing.
func (l RateLimit) String() string {
	if l.IsZero() {
		return "-"
	}
	return strconv.Itoa(l.Limit) + "/" + l.Period.String()
}

// ParseRateLimit reads a rate written N/PERIOD: at most N starts per
// PERIOD, a duration of at least a millisecond ("100/1s", "10/m", as the
// CLI's --rate and the dashboard's form take it).
func ParseRateLimit(s string) (RateLimit, error) {
	n, p, found := strings.Cut(s, "/")
	limit, err := strconv.Atoi(n)
	if !found || err != nil || limit <= 0 {
		return RateLimit{}, fmt.Errorf("rate %q: want N/PERIOD with N a positive number, e.g. 100/1s", s)
	}
	d, err := time.ParseDuration(p)
	if err != nil {
		d, err = time.ParseDuration("1" + p) // 10/s, 10/m
	}
	if err != nil || d < time.Millisecond {
		return RateLimit{}, fmt.Errorf("rate %q: want N/PERIOD with PERIOD a duration of at least 1ms, e.g. 100/1s", s)
	}
	return RateLimit{Limit: limit, Period: d}, nil
}

// String is the key limit as ParseKeyLimit reads it:
// PREFIX=CONCURRENCY[,weight=W][,rate=N/PERIOD].
func (k KeyLimit) String() string {
	s := k.Prefix + "=" + strconv.Itoa(k.Concurrency)
	if k.Weight > 0 {
		s += ",weight=" + strconv.Itoa(k.Weight)
	}
	if !k.Rate.IsZero() {
		s += ",rate=" + k.Rate.String()
	}
	return s
}

// ParseKeyLimit reads a key limit written
// PREFIX=CONCURRENCY[,weight=W][,rate=N/PERIOD] ("vip-=3,weight=4").
func ParseKeyLimit(s string) (KeyLimit, error) {
	bad := func(why string) (KeyLimit, error) {
		return KeyLimit{}, fmt.Errorf("key limit %q: %s; want PREFIX=CONCURRENCY[,weight=W][,rate=N/PERIOD]", s, why)
	}
	first, _, _ := strings.Cut(s, ",")
	i := strings.LastIndex(first, "=")
	if i < 0 {
		return bad("no concurrency")
	}
	k := KeyLimit{Prefix: s[:i]}
	if k.Prefix == "" {
		return bad("empty prefix")
	}
	fields := strings.Split(s[i+1:], ",")
	c, err := strconv.Atoi(fields[0])
	if err != nil || c < 0 {
		return bad("concurrency " + strconv.Quote(fields[0]) + " is not a number of runs")
	}
	k.Concurrency = c
	for _, f := range fields[1:] {
		name, v, _ := strings.Cut(f, "=")
		switch name {
		case "weight":
			w, err := strconv.Atoi(v)
			if err != nil || w <= 0 {
				return bad("weight " + strconv.Quote(v) + " is not a positive number")
			}
			k.Weight = w
		case "rate":
			if k.Rate, err = ParseRateLimit(v); err != nil {
				return bad(err.Error())
			}
		default:
			return bad("unknown field " + strconv.Quote(f))
		}
	}
	return k, nil
}

// StepRateLimit bounds how many attempts of a step begin per period across
// every engine of the database: for a step that calls an API with a rate
// limit of its own. An attempt the limit holds back does not begin: its run
// gives its lease back and waits, a pending row due when the limit frees a
// start (holding no worker slot), and tries again then. A retry is an
// attempt like the first, and counts.
type StepRateLimit struct {
	// Name names the limiter: steps naming the same limiter, in any
	// workflow, share its budget. Empty takes the step's name.
	Name string `json:"name,omitempty"`
	// Rate is the budget: at most Rate.Limit attempts begin in any period
	// of Rate.Period.
	Rate RateLimit `json:"rate"`
	// PerKey gives each concurrency key of the runs (StartOptions.
	// ConcurrencyKey) a budget of its own; runs without a key share one.
	PerKey bool `json:"perKey,omitempty"`
}

// Validate reports what is wrong with l, named as step's limit.
func (l StepRateLimit) Validate(step string) error {
	if l.Rate.IsZero() {
		return fmt.Errorf("step %s: RateLimit has no Rate (a Limit and a Period)", step)
	}
	if err := l.Rate.validate("RateLimit.Rate"); err != nil {
		return fmt.Errorf("step %s: %w", step, err)
	}
	return nil
}

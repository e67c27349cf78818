package flow

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
)

// QueueLimits is the flow control of a queue, for every engine of the
// database; see [flowtype.QueueLimits].
type QueueLimits = flowtype.QueueLimits

// RateLimit is at most Limit starts per Period; see [flowtype.RateLimit].
type RateLimit = flowtype.RateLimit

// KeyLimit is the flow control of the concurrency keys with a prefix; see
// [flowtype.KeyLimit].
type KeyLimit = flowtype.KeyLimit

// ParseRateLimit reads a rate written N/PERIOD ("100/1s"); see
// [flowtype.ParseRateLimit].
func ParseRateLimit(s string) (RateLimit, error) { return flowtype.ParseRateLimit(s) }

// ParseKeyLimit reads a key limit written
// PREFIX=CONCURRENCY[,weight=W][,rate=N/PERIOD]; see [flowtype.ParseKeyLimit].
func ParseKeyLimit(s string) (KeyLimit, error) { return flowtype.ParseKeyLimit(s) }

// QueueLimitUse is what a queue's limits hold at one moment; see
// [flowtype.QueueLimitUse].
type QueueLimitUse = flowtype.QueueLimitUse

// SetQueueLimits sets the flow control of queue for every engine of the
// database, in every process, replacing what it had; the zero QueueLimits
// removes it. It is recorded in the database, so it outlives restarts. It
// applies at once to this engine's claims, and within a second to the
// other engines', which read every queue's limits once a second; a claim
// of a queue an engine knows to be limited reads its limits again, so a
// limit lowered or removed applies there from the next claim. A bad limit
// is an error naming it, and changes nothing.
//
// On a shard set the limits are set in every file and hold in each file
// on its own: a global Concurrency or Rate of N allows N runs per file. Runs
// with a concurrency key are placed by it (unless they have a unique key),
// so per-key limits hold across the set.
func (e *Engine) SetQueueLimits(ctx context.Context, queue string, l QueueLimits) error {
	return e.onAll(func(inner *Engine) error { return inner.core.SetQueueLimits(ctx, queue, l) })
}

// QueueLimits returns the limits of every queue that has some, with what
// they hold now (runs executing, by key, and runs started within the
// queue's rate period), by queue name. On a shard set the figures are
// summed over its files.
func (e *Engine) QueueLimits(ctx context.Context) ([]QueueLimitUse, error) {
	answers := make([][]QueueLimitUse, 0, len(e.route.all()))
	for _, inner := range e.route.all() {
		uses, err := inner.core.QueueLimits(ctx)
		if err != nil {
			return nil, err
		}
		answers = append(answers, uses)
	}
	return merge(answers, mergeLimitUses), nil
}

// mergeLimitUses sums the limit figures of a shard set's files, queue by
// queue.
func mergeLimitUses(answers [][]QueueLimitUse) []QueueLimitUse {
	var out []QueueLimitUse
	at := make(map[string]int)
	for _, uses := range answers {
		for _, u := range uses {
			i, ok := at[u.Queue]
			if !ok {
				at[u.Queue] = len(out)
				u.RunningByKey = copyCounts(u.RunningByKey)
				out = append(out, u)
				continue
			}
			o := &out[i]
			o.Running += u.Running
			o.Started += u.Started
			o.Ready += u.Ready
			o.HeldBack += u.HeldBack
			for k, n := range u.RunningByKey {
				o.RunningByKey[k] += n
			}
		}
	}
	return out
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, n := range m {
		out[k] = n
	}
	return out
}

// HeldBy says why the ready run runID is not starting when a limit of its
// queue holds it back, e.g. "held by the global limit of queue mail: 5 of
// 5 running", and returns "" when no limit does. ErrRunNotFound when there
// is no such run.
func (e *Engine) HeldBy(ctx context.Context, runID string) (string, error) {
	var why string
	err := e.onRun(runID, func(c *engine.Engine) error {
		var err error
		why, err = c.HeldBy(ctx, runID)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("why run %s is held back: %w", runID, err)
	}
	return why, nil
}

// configLimits returns the limits cfg sets per queue (QueueConfig.Limits).
func configLimits(cfg *Config) map[string]QueueLimits {
	if cfg == nil {
		return nil
	}
	out := make(map[string]QueueLimits)
	for name, q := range cfg.Queues {
		if q.Limits != nil {
			out[name] = *q.Limits
		}
	}
	return out
}

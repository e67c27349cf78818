package engine

import (
	"errors"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// RetryPolicy is defined in flow/flowtype, where go doc shows its fields.
type RetryPolicy = flowtype.RetryPolicy

// DefaultRetryPolicy is the policy of steps that set none.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:     5,
	InitialInterval: time.Second,
	Coefficient:     2,
	MaxInterval:     time.Minute,
	Jitter:          0.2,
}

// finalAttempt reports whether a failed attempt is the last one p allows.
func finalAttempt(p RetryPolicy, attempt int, err error) bool {
	var perm *PermanentError
	return attempt >= p.MaxAttempts || errors.As(err, &perm)
}

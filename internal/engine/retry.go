package engine

import (
	"errors"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// DefaultRetryPolicy is the policy of steps that set none.
var DefaultRetryPolicy = flowtype.RetryPolicy{
	MaxAttempts:     5,
	InitialInterval: time.Second,
	Coefficient:     2,
	MaxInterval:     time.Minute,
	Jitter:          0.2,
}

// finalAttempt reports whether a failed attempt is the last one p allows.
func finalAttempt(p flowtype.RetryPolicy, attempt int, err error) bool {
	var perm *flowtype.PermanentError
	return attempt >= p.MaxAttempts || errors.As(err, &perm)
}

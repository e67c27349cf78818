package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// A failed attempt is the last when it used up MaxAttempts, or when its
// error, however wrapped, is permanent; any other failure is retried.
func TestFinalAttempt(t *testing.T) {
	t.Parallel()
	p := flowtype.RetryPolicy{MaxAttempts: 3}
	plain := errors.New("timeout")
	permanent := &flowtype.PermanentError{Err: errors.New("card declined")}
	tests := []struct {
		name    string
		attempt int
		err     error
		want    bool
	}{
		{"first of three", 1, plain, false},
		{"second of three", 2, plain, false},
		{"third of three", 3, plain, true},
		{"past the maximum", 4, plain, true},
		{"permanent on the first", 1, permanent, true},
		{"permanent, wrapped", 1, fmt.Errorf("charge: %w", permanent), true},
		{"a coded error is not permanent", 1, &flowtype.Error{Code: "card.declined"}, false},
	}
	for _, tt := range tests {
		if got := finalAttempt(p, tt.attempt, tt.err); got != tt.want {
			t.Errorf("%s: finalAttempt(attempt %d, %v) = %v, want %v", tt.name, tt.attempt, tt.err, got, tt.want)
		}
	}
	if !finalAttempt(flowtype.RetryPolicy{MaxAttempts: 1}, 1, plain) {
		t.Error("MaxAttempts 1: the first failure is not the last")
	}
}

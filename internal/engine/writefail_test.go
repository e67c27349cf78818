package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// A lost lease, a state conflict and a closed store are not retried,
// however wrapped; a busy, full or unavailable database is.
func TestRetryableWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("finish run r: %w", store.ErrLeaseLost), false},
		{fmt.Errorf("set status: %w", flowtype.ErrConflict), false},
		{fmt.Errorf("begin write: %w", flowtype.ErrClosed), false},
		{fmt.Errorf("commit: %w", flowtype.ErrBusy), true},
		{fmt.Errorf("commit: %w", flowtype.ErrDiskFull), true},
		{fmt.Errorf("begin write: %w", flowtype.ErrUnavailable), true},
		{errors.New("i/o error"), true},
	}
	for _, tt := range tests {
		if got := retryableWrite(tt.err); got != tt.want {
			t.Errorf("retryableWrite(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

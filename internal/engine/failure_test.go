package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The error rebuilt from a failure's record matches what the original
// matched: its code (a *flowtype.Error's, or a flowlite sentinel's engine
// code), its details and whether it was permanent.
func TestFailureOfAndRecordedError(t *testing.T) {
	t.Parallel()
	coded := &flowtype.Error{Code: "card.declined", Message: "declined", Details: []byte(`{"bank":"x"}`)}
	tests := []struct {
		name      string
		err       error
		want      store.Failure
		matches   error // errors.Is holds of the rebuilt error
		permanent bool
	}{
		{"plain", errors.New("boom"), store.Failure{}, nil, false},
		{"coded, wrapped", fmt.Errorf("charge: %w", coded), store.Failure{Code: "card.declined", Details: coded.Details}, &flowtype.Error{Code: "card.declined"}, false},
		{"sentinel", fmt.Errorf("look up: %w", flowtype.ErrRunNotFound), store.Failure{Code: flowtype.CodeRunNotFound}, flowtype.ErrRunNotFound, false},
		{"permanent sentinel", &flowtype.PermanentError{Err: flowtype.ErrConflict}, store.Failure{Code: flowtype.CodeConflict, Permanent: true}, flowtype.ErrConflict, true},
		{"permanent plain", &flowtype.PermanentError{Err: errors.New("no")}, store.Failure{Permanent: true}, nil, true},
	}
	for _, tt := range tests {
		f := failureOf(tt.err)
		if f.Code != tt.want.Code || string(f.Details) != string(tt.want.Details) || f.Permanent != tt.want.Permanent {
			t.Errorf("%s: failureOf = %+v, want %+v", tt.name, f, tt.want)
			continue
		}
		rebuilt := recordedError(tt.err.Error(), f)
		if tt.matches != nil && !errors.Is(rebuilt, tt.matches) {
			t.Errorf("%s: rebuilt %v does not match %v", tt.name, rebuilt, tt.matches)
		}
		var perm *flowtype.PermanentError
		if errors.As(rebuilt, &perm) != tt.permanent {
			t.Errorf("%s: rebuilt %v permanent %v, want %v", tt.name, rebuilt, !tt.permanent, tt.permanent)
		}
		var fe *flowtype.Error
		if !errors.As(rebuilt, &fe) || fe.Code != f.Code || string(fe.Details) != string(f.Details) || fe.Message != tt.err.Error() {
			t.Errorf("%s: rebuilt %v is not a *flowtype.Error with the record's message, code and details", tt.name, rebuilt)
		}
	}
	// A plain error's record matches no sentinel once rebuilt.
	if errors.Is(recordedError("boom", store.Failure{}), flowtype.ErrConflict) {
		t.Error("a plain error rebuilt matches ErrConflict")
	}
}

package storecopy

import (
	"testing"

	"github.com/flowlite/flowlite/internal/store"
)

func TestReleaseLease(t *testing.T) {
	owner, until := "engine-1", int64(123)
	for _, c := range []struct{ status, want string }{
		{"running", "pending"}, {"compensating", "compensating"},
	} {
		r := store.CopyRun{Status: c.status, LeaseOwner: &owner, LeaseExpiresAt: &until}
		releaseLease(&r)
		if r.Status != c.want || r.LeaseOwner != nil || r.LeaseExpiresAt != nil {
			t.Errorf("%s: got %+v", c.status, r)
		}
	}
	r := store.CopyRun{Status: "waiting"}
	releaseLease(&r)
	if r.Status != "waiting" {
		t.Errorf("unleased run changed: %+v", r)
	}
}

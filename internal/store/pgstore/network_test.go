package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestWriteWaitsForAConnectionAtMostNetworkTimeout: a write that gets no
// connection (here all of the pool's are taken; with the server out of
// reach, none can be dialled) fails after NetworkTimeout although its
// context never ends, as the engine's writes' contexts do not, and says
// why without passing for the caller's own deadline.
func TestWriteWaitsForAConnectionAtMostNetworkTimeout(t *testing.T) {
	t.Parallel()
	const wait = 500 * time.Millisecond
	s := openStore(t, pgstore.Options{MaxConns: 1, NetworkTimeout: wait})
	held, err := pgstore.DB(s).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = s.Write(context.WithoutCancel(t.Context()), func(store.Tx) error { return nil })
	took := time.Since(began)
	held.Close()
	if err == nil || !strings.Contains(err.Error(), "no database connection within") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write with the pool exhausted: %v; want a wait error that is not context.DeadlineExceeded", err)
	}
	if took < wait || took > wait+2*time.Second {
		t.Errorf("the write gave up after %s, want about %s", took, wait)
	}
	if err := s.Write(t.Context(), func(store.Tx) error { return nil }); err != nil {
		t.Errorf("write once a connection is free: %v", err)
	}
}

package broadcast

import (
	"testing"
	"time"
)

func TestNotifyWakesEveryWaiterOnce(t *testing.T) {
	t.Parallel()
	var b Broadcast
	b.Notify() // nobody waits: nothing to do
	first, second := b.Wait(), b.Wait()
	if first != second {
		t.Fatal("two waits before a notify got different channels")
	}
	select {
	case <-first:
		t.Fatal("channel closed before Notify")
	default:
	}
	b.Notify()
	for _, ch := range []<-chan struct{}{first, second} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("Notify did not close a waiter's channel")
		}
	}
	next := b.Wait()
	select {
	case <-next:
		t.Fatal("a wait after Notify got a closed channel")
	default:
	}
}

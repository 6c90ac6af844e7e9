package hostslot

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAcquireBoundsTheHolders: of 12 goroutines that each hold a slot for
// a while, never more than the 3 slots' worth hold one at once, and all
// get one in the end.
func TestAcquireBoundsTheHolders(t *testing.T) {
	name := fmt.Sprintf("commprof-test-%d", os.Getpid())
	var holding, most, done atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := Acquire(context.Background(), name, 3, i)
			if err != nil {
				t.Error(err)
				return
			}
			h := holding.Add(1)
			for {
				m := most.Load()
				if h <= m || most.CompareAndSwap(m, h) {
					break
				}
			}
			time.Sleep(30 * time.Millisecond)
			holding.Add(-1)
			done.Add(1)
			release()
		}()
	}
	wg.Wait()
	if m := most.Load(); m > 3 || m < 1 {
		t.Errorf("%d held a slot at once, want at most 3", m)
	}
	if done.Load() != 12 {
		t.Errorf("%d of 12 got a slot", done.Load())
	}
}

// TestAcquireGivesUpWithTheContext: with every slot held, a waiter
// returns the context's error when it ends, and gets the slot once it is
// given back.
func TestAcquireGivesUpWithTheContext(t *testing.T) {
	name := fmt.Sprintf("commprof-test-ctx-%d", os.Getpid())
	release, err := Acquire(context.Background(), name, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Acquire(ctx, name, 1, 0); err != context.DeadlineExceeded {
		t.Fatalf("waiting on a held slot: %v, want the deadline", err)
	}
	release()
	again, err := Acquire(context.Background(), name, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	again()
}

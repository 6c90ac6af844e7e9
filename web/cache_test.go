package web

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestServeCache(t *testing.T) {
	ctx := context.Background()
	c := newCache[int](2)
	var fills atomic.Int32
	entered := make(chan struct{}, 1)
	slow := make(chan struct{})
	fill := func(v int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			fills.Add(1)
			select {
			case entered <- struct{}{}:
			default:
			}
			<-slow
			return v, nil
		}
	}
	// Gets of a key being computed wait for it instead of computing it
	// again.
	var wg sync.WaitGroup
	got := make([]int, 10)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.get(ctx, "a", fill(1))
		}()
		if i == 0 {
			<-entered
		}
	}
	close(slow)
	wg.Wait()
	if fills.Load() != 1 {
		t.Fatalf("%d fills for one key", fills.Load())
	}
	for _, v := range got {
		if v != 1 {
			t.Fatalf("got %v", got)
		}
	}
	// Least recently used keys go first.
	c.get(ctx, "b", fill(2))
	c.get(ctx, "a", fill(1)) // a is now the most recent
	c.get(ctx, "c", fill(3)) // evicts b
	if c.len() != 2 {
		t.Fatalf("%d kept, want 2", c.len())
	}
	n := fills.Load()
	c.get(ctx, "a", fill(1))
	if fills.Load() != n {
		t.Fatal("a was evicted instead of b")
	}
	c.get(ctx, "b", fill(2))
	if fills.Load() != n+1 {
		t.Fatal("b was kept")
	}
	// Errors are not kept.
	boom := errors.New("boom")
	for i := range 2 {
		if _, err := c.get(ctx, "e", func(context.Context) (int, error) { return 0, boom }); err != boom {
			t.Fatalf("try %d: %v", i, err)
		}
	}
	if v, err := c.get(ctx, "e", func(context.Context) (int, error) { return 5, nil }); v != 5 || err != nil {
		t.Fatalf("after an error: %v %v", v, err)
	}
}

// A computation abandoned by its own request is started again for a
// waiting request that is still alive.
func TestServeCacheRetriesAbandonedFill(t *testing.T) {
	c := newCache[string](4)
	first, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.get(first, "k", func(ctx context.Context) (string, error) {
			close(started)
			<-ctx.Done()
			return "", fmt.Errorf("reading: %w", ctx.Err())
		})
		done <- err
	}()
	<-started
	result := make(chan string, 1)
	go func() {
		v, _ := c.get(context.Background(), "k", func(context.Context) (string, error) { return "fresh", nil })
		result <- v
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned: %v", err)
	}
	if v := <-result; v != "fresh" {
		t.Fatalf("the waiting request got %q", v)
	}
}

// The cache keeps values of at most its byte budget in all, dropping the
// least recently used first, and never keeps a value larger than the
// budget by itself (its callers still get it).
func TestServeCacheByteBudget(t *testing.T) {
	ctx := context.Background()
	c := newSizedCache(100, 1000, func(b []byte) int64 { return int64(len(b)) })
	fills := map[string]int{}
	get := func(key string, n int) []byte {
		t.Helper()
		v, err := c.get(ctx, key, func(context.Context) ([]byte, error) {
			fills[key]++
			return make([]byte, n), nil
		})
		if err != nil || len(v) != n {
			t.Fatalf("%s: %d bytes, %v", key, len(v), err)
		}
		if _, b := c.usage(); b > 1000 {
			t.Fatalf("after %s: %d bytes kept, budget 1000", key, b)
		}
		return v
	}
	get("a", 400)
	get("b", 400)
	get("a", 400) // a is the most recent
	get("c", 400) // 1200 > 1000: b goes
	if items, b := c.usage(); items != 2 || b != 800 {
		t.Fatalf("kept %d values of %d bytes, want 2 of 800", items, b)
	}
	get("a", 400)
	get("b", 400)
	if fills["a"] != 1 || fills["b"] != 2 {
		t.Fatalf("fills %v: a should have stayed, b been dropped", fills)
	}
	// Larger than the whole budget: answered, not kept, nothing evicted
	// for it.
	_, before := c.usage()
	get("huge", 5000)
	get("huge", 5000)
	if _, b := c.usage(); fills["huge"] != 2 || b != before {
		t.Fatalf("huge filled %d times, %d bytes kept (before %d)", fills["huge"], b, before)
	}
	// Many values: the accounting stays within the budget and equals the
	// sum of what is kept.
	for i := range 200 {
		get(fmt.Sprint("k", i), 1+i%300)
	}
	items, b := c.usage()
	if b > 1000 || items == 0 {
		t.Fatalf("%d values, %d bytes", items, b)
	}
	var sum int64
	for el := c.order.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*cacheEntry[[]byte]).size
	}
	if sum != b {
		t.Fatalf("accounted %d bytes, the values kept hold %d", b, sum)
	}
}

package web

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// cache is a bounded least-recently-used map whose values are computed on
// demand, once: requests for a key that is being computed wait for that
// computation instead of starting their own. Errors are not kept. It is
// safe for concurrent use.
type cache[V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheEntry[V], most recently used first
	items map[string]*list.Element
}

type cacheEntry[V any] struct {
	key  string
	done chan struct{} // closed once val and err are set
	val  V
	err  error
}

func newCache[V any](max int) *cache[V] {
	return &cache[V]{max: max, order: list.New(), items: map[string]*list.Element{}}
}

// get returns the value of key, computing it with fill if it is neither
// kept nor being computed. A computation abandoned because its own
// request went away is started again for a caller whose ctx is alive.
func (c *cache[V]) get(ctx context.Context, key string, fill func(context.Context) (V, error)) (V, error) {
	var zero V
	for {
		c.mu.Lock()
		if el, ok := c.items[key]; ok {
			c.order.MoveToFront(el)
			e := el.Value.(*cacheEntry[V])
			c.mu.Unlock()
			select {
			case <-e.done:
			case <-ctx.Done():
				return zero, ctx.Err()
			}
			if e.err != nil && isContextErr(e.err) && ctx.Err() == nil {
				continue
			}
			return e.val, e.err
		}
		e := &cacheEntry[V]{key: key, done: make(chan struct{})}
		c.items[key] = c.order.PushFront(e)
		for c.order.Len() > c.max {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.items, old.Value.(*cacheEntry[V]).key)
		}
		c.mu.Unlock()
		c.fill(ctx, e, fill)
		return e.val, e.err
	}
}

func (c *cache[V]) fill(ctx context.Context, e *cacheEntry[V], fill func(context.Context) (V, error)) {
	defer close(e.done)
	ok := false
	defer func() {
		if ok {
			return
		}
		if e.err == nil {
			e.err = errors.New("computing a page failed") // fill panicked
		}
		c.mu.Lock()
		if el, found := c.items[e.key]; found && el.Value == e {
			c.order.Remove(el)
			delete(c.items, e.key)
		}
		c.mu.Unlock()
	}()
	e.val, e.err = fill(ctx)
	ok = e.err == nil
}

// len returns the number of keys kept or being computed.
func (c *cache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

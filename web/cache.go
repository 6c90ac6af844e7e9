package web

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// cache is a bounded least-recently-used map whose values are computed on
// demand, once: requests for a key that is being computed wait for that
// computation instead of starting their own. It keeps at most maxItems
// values and, when size is set, values of at most maxBytes in all, as size
// measures them; a value larger than maxBytes by itself is returned to
// the callers that asked for it and not kept. Errors are not kept. It is
// safe for concurrent use.
type cache[V any] struct {
	mu       sync.Mutex
	maxItems int
	maxBytes int64
	size     func(V) int64 // nil: values are not counted in bytes
	bytes    int64         // sum of the sizes of the values kept
	order    *list.List    // of *cacheEntry[V], most recently used first
	items    map[string]*list.Element
}

type cacheEntry[V any] struct {
	key  string
	done chan struct{} // closed once val and err are set
	val  V
	err  error
	size int64 // counted in cache.bytes once the value is kept
	// waiters is how many gets have waited for this computation.
	waiters int
}

// newCache returns a cache of at most maxItems values.
func newCache[V any](maxItems int) *cache[V] {
	return &cache[V]{maxItems: maxItems, order: list.New(), items: map[string]*list.Element{}}
}

// newSizedCache returns a cache of at most maxItems values of at most
// maxBytes in all, as size measures them.
func newSizedCache[V any](maxItems int, maxBytes int64, size func(V) int64) *cache[V] {
	c := newCache[V](maxItems)
	c.maxBytes, c.size = maxBytes, size
	return c
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
			select {
			case <-e.done:
			default:
				e.waiters++
			}
			c.mu.Unlock()
			select {
			case <-e.done:
			case <-ctx.Done():
				return zero, ctx.Err()
			}
			// Compute it again when the computation was abandoned by its
			// own request, or found no build slot while this caller holds
			// one (a page that needs a summary another request queued for).
			if e.err != nil && (isContextErr(e.err) && ctx.Err() == nil || errors.Is(e.err, errBusy) && ctx.Value(slotKey{}) != nil) {
				continue
			}
			return e.val, e.err
		}
		e := &cacheEntry[V]{key: key, done: make(chan struct{})}
		c.items[key] = c.order.PushFront(e)
		c.evictLocked()
		c.mu.Unlock()
		c.fill(ctx, e, fill)
		return e.val, e.err
	}
}

// evictLocked drops the least recently used entries until the cache is
// within its bounds. Entries being computed count against maxItems (and
// are dropped from the map, not stopped: their callers still get them)
// but not against maxBytes until they are done.
func (c *cache[V]) evictLocked() {
	for el := c.order.Back(); el != nil && (c.order.Len() > c.maxItems || c.size != nil && c.bytes > c.maxBytes); {
		prev := el.Prev()
		e := el.Value.(*cacheEntry[V])
		if c.order.Len() > c.maxItems || e.size > 0 {
			c.removeLocked(el)
		}
		el = prev
	}
}

func (c *cache[V]) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry[V])
	c.order.Remove(el)
	delete(c.items, e.key)
	c.bytes -= e.size
	e.size = 0
}

func (c *cache[V]) fill(ctx context.Context, e *cacheEntry[V], fill func(context.Context) (V, error)) {
	defer close(e.done)
	ok := false
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		el, found := c.items[e.key]
		found = found && el.Value == e
		if !ok {
			if e.err == nil {
				e.err = errors.New("computing a page failed") // fill panicked
			}
			if found {
				c.removeLocked(el)
			}
			return
		}
		if !found || c.size == nil {
			return
		}
		size := max(1, c.size(e.val))
		if size > c.maxBytes {
			c.removeLocked(el) // the callers have it; keeping it would empty the cache
			return
		}
		e.size = size
		c.bytes += size
		c.evictLocked()
	}()
	e.val, e.err = fill(ctx)
	ok = e.err == nil
}

// waiters returns how many gets have waited for key's computation, if
// it is kept or being computed.
func (c *cache[V]) waiters(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		return el.Value.(*cacheEntry[V]).waiters
	}
	return 0
}

// len returns the number of keys kept or being computed.
func (c *cache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// usage returns the number of values kept or being computed and the
// bytes of those kept.
func (c *cache[V]) usage() (items int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

package collectives

import (
	"context"
	"errors"
	"math/bits"
	"sync"
)

// ring runs the ring reduce-scatter phase (rs) and/or the ring allgather
// phase (ag) over data, which holds the whole buffer split into Size()
// blocks by BlockRange. After the reduce-scatter phase rank r holds the
// reduced block r; after the allgather phase every rank holds every block.
//
// Each step's block is cut into segments of about k.seg bytes that flow
// through three goroutines: a sender, a receiver and the caller, which
// reduces. A segment is sent on as soon as it has been reduced (or
// received, in the allgather phase), so reduction overlaps the transfer
// of the next segment and consecutive steps overlap.
func (k *call) ring(data []byte, d DType, rs, ag bool, op ReduceOp) error {
	n, r := k.c.Size(), k.c.rank
	es := d.Size()
	elems := len(data) / es
	right, left := (r+1)%n, (r-1+n)%n

	type item struct {
		send, recv int // blocks
		reduce     bool
	}
	items := make([]item, 0, 2*(n-1))
	if rs {
		for s := range n - 1 {
			items = append(items, item{mod(r-s-1, n), mod(r-s-2, n), true})
		}
	}
	if ag {
		for s := range n - 1 {
			items = append(items, item{mod(r-s, n), mod(r-s-1, n), false})
		}
	}
	maxBlock := (elems + n - 1) / n * es
	nseg := max(1, (maxBlock+k.seg-1)/k.seg)
	// seg returns the bytes of segment j of block b.
	seg := func(b, j int) []byte {
		lo, hi := BlockRange(elems, n, b)
		slo, shi := BlockRange(hi-lo, nseg, j)
		return data[(lo+slo)*es : (lo+shi)*es]
	}
	segMax := ((maxBlock/es + nseg - 1) / nseg) * es

	if nseg == 1 && maxBlock <= eagerMax {
		// Small: one message per step, no goroutines.
		tmp := getPayload(segMax)
		defer putPayload(tmp)
		for i, it := range items {
			rb := seg(it.recv, 0)
			dst := rb
			if it.reduce {
				dst = (*tmp)[:len(rb)]
			}
			if err := k.sendrecv(right, seg(it.send, 0), left, dst, i); err != nil {
				return err
			}
			if it.reduce {
				k.reduce(rb, dst, d, op, i)
			}
		}
		return nil
	}

	ctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	sub := *k
	sub.ctx = ctx

	// The sender sends item i's segment j once item i-1's segment j has
	// been processed (reduced, or received in the allgather phase): one
	// token per processed segment, in order. This goroutine posts receives
	// up to nslots segments ahead, so the transport reads each segment
	// straight into its slot (or into place) while earlier ones are reduced.
	// An allgather step receives into a block that an earlier
	// reduce-scatter step reduced, so a receive may be posted only after
	// that reduce: nslots <= n*nseg guarantees it.
	total := len(items) * nseg
	tokens := make(chan struct{}, total)
	nslots := min(4, n*nseg)
	slots := make([]*[]byte, nslots)
	for i := range slots {
		slots[i] = getPayload(segMax)
	}
	defer func() {
		for _, s := range slots {
			putPayload(s)
		}
	}()

	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, it := range items {
			for j := range nseg {
				if i > 0 {
					select {
					case <-tokens:
					case <-ctx.Done():
						return
					}
				}
				if serr = sub.send(right, i, seg(it.send, j)); serr != nil {
					cancel()
					return
				}
			}
		}
	}()

	pending := make([]Receive, nslots)
	posted := 0
	post := func(f int) {
		it, j := items[f/nseg], f%nseg
		dst := seg(it.recv, j)
		if it.reduce {
			dst = (*slots[f%nslots])[:len(dst)]
		}
		pending[f%nslots] = sub.post(left, f/nseg, dst)
	}
	var rerr error
	for f := range total {
		for ; posted < total && posted < f+nslots; posted++ {
			post(posted)
		}
		_, rerr = pending[f%nslots].Wait(ctx)
		pending[f%nslots] = nil
		if rerr != nil {
			cancel()
			break
		}
		it, j := items[f/nseg], f%nseg
		if it.reduce {
			rb := seg(it.recv, j)
			k.reduce(rb, (*slots[f%nslots])[:len(rb)], d, op, f/nseg)
		}
		tokens <- struct{}{}
	}
	if rerr != nil {
		// Withdraw the receives still posted before their buffers go back.
		for _, r := range pending {
			if r != nil {
				_, _ = r.Wait(ctx)
			}
		}
	}
	wg.Wait() // the sender may still be sending the last step
	cancel()
	switch {
	case rerr != nil && k.ctx.Err() == nil && serr != nil && errors.Is(rerr, context.Canceled):
		return serr
	case rerr != nil:
		if k.ctx.Err() != nil {
			return k.ctx.Err()
		}
		return rerr
	}
	return serr
}

func mod(a, n int) int { return ((a % n) + n) % n }

// fold reduces a world of n ranks to the largest power of two p <= n: of
// the first 2(n-p) ranks, each even one sends its buffer to the odd one
// above it and sits out. It returns this rank's index among the p ranks, or
// -1 if it sits out.
func (k *call) fold(buf []byte, d DType, op ReduceOp, tmp []byte) (newRank, p int, err error) {
	n, r := k.c.Size(), k.c.rank
	p = 1 << (bits.Len(uint(n)) - 1)
	rem := n - p
	switch {
	case r < 2*rem && r%2 == 0:
		return -1, p, k.send(r+1, 0, buf)
	case r < 2*rem:
		if err := k.recv(r-1, 0, tmp); err != nil {
			return 0, p, err
		}
		k.reduce(buf, tmp, d, op, 0)
		return r / 2, p, nil
	}
	return r - rem, p, nil
}

// unfold sends the result back to the ranks that sat out of fold.
func (k *call) unfold(buf []byte, newRank, chunk int) error {
	n, r := k.c.Size(), k.c.rank
	rem := n - (1 << (bits.Len(uint(n)) - 1))
	switch {
	case r < 2*rem && r%2 == 0:
		return k.recv(r+1, chunk, buf)
	case r < 2*rem:
		return k.send(r-1, chunk, buf)
	}
	return nil
}

// realRank maps an index among the p folded ranks back to a rank.
func (k *call) realRank(newRank int) int {
	n := k.c.Size()
	rem := n - (1 << (bits.Len(uint(n)) - 1))
	if newRank < rem {
		return newRank*2 + 1
	}
	return newRank + rem
}

// recursiveDoubling allreduce: lg p exchanges of the whole buffer.
func (k *call) recursiveDoubling(buf Buffer, op ReduceOp) error {
	tmp := getPayload(len(buf.b))
	defer putPayload(tmp)
	nr, p, err := k.fold(buf.b, buf.dtype, op, *tmp)
	if err != nil || nr < 0 {
		if err == nil {
			err = k.unfold(buf.b, nr, 64)
		}
		return err
	}
	step := 1
	for mask := 1; mask < p; mask, step = mask<<1, step+1 {
		peer := k.realRank(nr ^ mask)
		if err := k.sendrecv(peer, buf.b, peer, *tmp, step); err != nil {
			return err
		}
		// The reductions are commutative element by element (IEEE a+b ==
		// b+a), so both partners compute bit-identical results.
		k.reduce(buf.b, *tmp, buf.dtype, op, step)
	}
	return k.unfold(buf.b, nr, 64)
}

// rabenseifner allreduce: reduce-scatter by recursive halving, then
// allgather by recursive doubling, over the p folded ranks.
func (k *call) rabenseifner(buf Buffer, op ReduceOp) error {
	es := buf.dtype.Size()
	elems := buf.Len()
	tmp := getPayload(len(buf.b))
	defer putPayload(tmp)
	nr, p, err := k.fold(buf.b, buf.dtype, op, *tmp)
	if err != nil || nr < 0 {
		if err == nil {
			err = k.unfold(buf.b, nr, 64)
		}
		return err
	}
	// bytes returns the bytes of blocks [lo, hi) of p blocks.
	bytesOf := func(lo, hi int) []byte {
		a, _ := BlockRange(elems, p, lo)
		_, b := BlockRange(elems, p, hi-1)
		return buf.b[a*es : b*es]
	}
	type span struct{ lo, mid, hi int }
	var spans []span
	lo, hi := 0, p
	step := 1
	for mask := p / 2; mask > 0; mask, step = mask/2, step+1 {
		peer := k.realRank(nr ^ mask)
		mid := (lo + hi) / 2
		keep, give := bytesOf(lo, mid), bytesOf(mid, hi)
		if nr&mask != 0 {
			keep, give = give, keep
		}
		in := (*tmp)[:len(keep)]
		if err := k.sendrecv(peer, give, peer, in, step); err != nil {
			return err
		}
		k.reduce(keep, in, buf.dtype, op, step)
		spans = append(spans, span{lo, mid, hi})
		if nr&mask != 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		mask := p >> (i + 1)
		peer := k.realRank(nr ^ mask)
		mine, theirs := bytesOf(s.lo, s.mid), bytesOf(s.mid, s.hi)
		if nr&mask != 0 {
			mine, theirs = theirs, mine
		}
		if err := k.sendrecv(peer, mine, peer, theirs, step); err != nil {
			return err
		}
		step++
	}
	return k.unfold(buf.b, nr, 64)
}

// treeReduce reduces buf to root over a binomial tree. Non-root ranks'
// buffers are left unchanged. Steps are numbered from chunk0.
func (k *call) treeReduce(buf Buffer, op ReduceOp, root, chunk0 int) error {
	n, r := k.c.Size(), k.c.rank
	vr := mod(r-root, n)
	acc := buf.b
	var tmp, work *[]byte
	defer func() {
		if tmp != nil {
			putPayload(tmp)
		}
		if work != nil {
			putPayload(work)
		}
	}()
	for mask, step := 1, chunk0; mask < n; mask, step = mask<<1, step+1 {
		if vr&mask != 0 {
			return k.send(mod(vr-mask+root, n), step, acc)
		}
		child := vr | mask
		if child >= n {
			continue
		}
		if tmp == nil {
			tmp = getPayload(len(buf.b))
		}
		if err := k.recv(mod(child+root, n), step, *tmp); err != nil {
			return err
		}
		if vr != 0 && work == nil {
			work = getPayload(len(buf.b))
			copy(*work, buf.b)
			acc = *work
		}
		k.reduce(acc, *tmp, buf.dtype, op, step)
	}
	return nil
}

// treeBroadcast sends root's buf down a binomial tree. Steps are numbered
// from chunk0.
func (k *call) treeBroadcast(buf []byte, root, chunk0 int) error {
	n, r := k.c.Size(), k.c.rank
	vr := mod(r-root, n)
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := k.recv(mod(vr-mask+root, n), chunk0+bits.TrailingZeros(uint(mask)), buf); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := k.send(mod(vr+mask+root, n), chunk0+bits.TrailingZeros(uint(mask)), buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// chainBroadcast pipelines root's buf along the chain root, root+1, ...:
// each rank forwards a segment while it receives the next.
func (k *call) chainBroadcast(buf []byte, es, root int) error {
	n, r := k.c.Size(), k.c.rank
	vr := mod(r-root, n)
	elems := len(buf) / es
	nseg := max(1, (len(buf)+k.seg-1)/k.seg)
	seg := func(j int) []byte {
		lo, hi := BlockRange(elems, nseg, j)
		return buf[lo*es : hi*es]
	}
	prev, next := mod(r-1, n), mod(r+1, n)
	if vr == 0 {
		for j := range nseg {
			if err := k.send(next, j, seg(j)); err != nil {
				return err
			}
		}
		return nil
	}
	if vr == n-1 {
		for j := range nseg {
			if err := k.recv(prev, j, seg(j)); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(k.ctx)
	defer cancel()
	sub := *k
	sub.ctx = ctx
	got := make(chan int, nseg)
	errc := make(chan error, 1)
	go func() {
		for j := range nseg {
			select {
			case <-got:
			case <-ctx.Done():
				errc <- ctx.Err()
				return
			}
			if err := sub.send(next, j, seg(j)); err != nil {
				cancel()
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var rerr error
	for j := range nseg {
		if rerr = sub.recv(prev, j, seg(j)); rerr != nil {
			cancel()
			break
		}
		got <- j
	}
	serr := <-errc
	if rerr != nil {
		return rerr
	}
	return serr
}

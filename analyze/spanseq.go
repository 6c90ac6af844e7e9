package analyze

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// Merged spans held packed, and built as they come: a rank's spans of
// communication are one per call where calls do not touch (an MPI
// program's), and held as spans they were the largest part of a
// summary's memory after the calls themselves.

// spanSeq is a list of merged spans as union returns them, packed: each
// span its start's distance from the previous span's end and its length,
// as varints (2 to 6 bytes a span where a span takes 16), in a byteLog
// that spills with the calls'.
type spanSeq struct {
	log    byteLog
	n      int
	total  int64 // the spans' length
	lastHi int64
}

// newSpanSeq returns an empty list that spills to sp (nil: never).
func newSpanSeq(sp *logSpill) *spanSeq { return &spanSeq{log: byteLog{sp: sp}} }

func (q *spanSeq) push(x span) {
	b := q.log.room(2 * binary.MaxVarintLen64)
	b = binary.AppendVarint(b, x.lo-q.lastHi)
	b = binary.AppendVarint(b, x.hi-x.lo)
	q.log.wrote(b)
	q.lastHi = x.hi
	q.total += x.hi - x.lo
	q.n++
}

// length is the spans' total length (0 for a nil list).
func (q *spanSeq) length() int64 {
	if q == nil {
		return 0
	}
	return q.total
}

// packSpans packs merged spans.
func packSpans(sp *logSpill, s []span) *spanSeq {
	q := newSpanSeq(sp)
	for _, x := range s {
		q.push(x)
	}
	return q
}

// spanIter walks a spanSeq: cur is the span it is on while ok. A copy
// walks on from where the original was.
type spanIter struct {
	rd  byteReader
	hi  int64
	cur span
	ok  bool
}

// iter returns an iterator on q's first span (q may be nil).
func (q *spanSeq) iter() spanIter {
	var it spanIter
	if q != nil {
		it.rd = q.log.reader()
	}
	it.next()
	return it
}

// fork returns a copy that walks on by itself.
func (it spanIter) fork() spanIter {
	it.rd.own()
	return it
}

func (it *spanIter) next() {
	var x [2]uint64
	n := uvarints(it.rd.bytes(), x[:])
	if it.ok = n > 0; !it.ok {
		return // past the end, or not what push wrote: stop rather than loop
	}
	it.rd.skip(n)
	lo := it.hi + unzig(x[0])
	it.cur, it.hi = span{lo, lo + unzig(x[1])}, lo+unzig(x[1])
}

// spanUnion merges spans as they come into a spanSeq. Spans come nearly
// in order of their starts (a rank's calls on a communicator; messages
// whose events are written when a wait completes them, after others
// posted later): the last unionTail merged spans are held unpacked, and
// a span that starts among them is merged in its place. One that starts
// before them makes it collect every span, to be merged by union at the
// end: the result is union's either way.
type spanUnion struct {
	sp       *logSpill
	out      *spanSeq
	tail     []span // from head on: merged, apart and in order; before them, out's
	head     int
	pushedHi int64 // the end of out's last span
	pushed   bool
	raw      []span // once a span came out of order
	late     bool
}

// unionTail is how many merged spans a spanUnion holds unpacked for
// spans that come late.
const unionTail = 256

func (u *spanUnion) add(x span) {
	if u.late {
		u.raw = append(u.raw, x)
		return
	}
	t := u.tail[u.head:]
	if n := len(t); n > 0 && x.lo >= t[n-1].lo {
		if x.lo <= t[n-1].hi {
			t[n-1].hi = max(t[n-1].hi, x.hi)
			return
		}
		if n == unionTail {
			u.push()
		}
		u.tail = append(u.tail, x)
		return
	}
	if u.pushed && x.lo <= u.pushedHi {
		// Before the spans held: the spans merged so far, and every
		// one from now, are merged at the end.
		for it := u.out.iter(); it.ok; it.next() {
			u.raw = append(u.raw, it.cur)
		}
		u.raw = append(append(u.raw, t...), x)
		u.out, u.tail, u.head, u.late = nil, nil, 0, true
		return
	}
	// Among the spans held (or the first): merged in its place.
	i, _ := slices.BinarySearchFunc(t, x.lo, func(s span, lo int64) int { return cmp.Compare(s.lo, lo) })
	if i > 0 && x.lo <= t[i-1].hi {
		i--
		t[i].hi = max(t[i].hi, x.hi)
	} else {
		t = slices.Insert(t, i, x)
	}
	j := i + 1
	for j < len(t) && t[j].lo <= t[i].hi {
		t[i].hi = max(t[i].hi, t[j].hi)
		j++
	}
	u.tail, u.head = slices.Delete(t, i+1, j), 0
	if len(u.tail) > unionTail {
		u.push()
	}
}

// push packs the first span held; the spans held move to the front of
// tail now and then, not at each push.
func (u *spanUnion) push() {
	if u.out == nil {
		u.out = newSpanSeq(u.sp)
	}
	x := u.tail[u.head]
	u.out.push(x)
	u.pushedHi, u.pushed = x.hi, true
	if u.head++; u.head == unionTail {
		u.tail, u.head = u.tail[:copy(u.tail, u.tail[u.head:])], 0
	}
}

// seq returns the merged spans; add no more after.
func (u *spanUnion) seq() *spanSeq {
	if u.late {
		return packSpans(u.sp, union(u.raw))
	}
	for u.head < len(u.tail) {
		u.push()
	}
	if u.out == nil {
		return newSpanSeq(u.sp)
	}
	return u.out
}

// mergeSeqs is the union of merged span lists.
func mergeSeqs(sp *logSpill, qs ...*spanSeq) *spanSeq {
	var its []spanIter
	for _, q := range qs {
		if it := q.iter(); it.ok {
			its = append(its, it)
		}
	}
	switch len(its) {
	case 0:
		return newSpanSeq(sp)
	case 1:
		for _, q := range qs {
			if q != nil && q.n > 0 {
				return q
			}
		}
	}
	u := spanUnion{sp: sp}
	for {
		best := -1
		for i := range its {
			if its[i].ok && (best < 0 || cmp.Less(its[i].cur.lo, its[best].cur.lo)) {
				best = i
			}
		}
		if best < 0 {
			return u.seq()
		}
		u.add(its[best].cur)
		its[best].next()
	}
}

// intersectSeq is intersect of packed lists.
func intersectSeq(sp *logSpill, a, b *spanSeq) *spanSeq {
	out := newSpanSeq(sp)
	i, j := a.iter(), b.iter()
	for i.ok && j.ok {
		lo, hi := max(i.cur.lo, j.cur.lo), min(i.cur.hi, j.cur.hi)
		if lo < hi {
			out.push(span{lo, hi})
		}
		if i.cur.hi < j.cur.hi {
			i.next()
		} else {
			j.next()
		}
	}
	return out
}

// subtractSeq is subtract of packed lists: a itself when b is empty.
func subtractSeq(sp *logSpill, a, b *spanSeq) *spanSeq {
	if b == nil || b.n == 0 {
		return a
	}
	out := newSpanSeq(sp)
	j := b.iter()
	for x := a.iter(); x.ok; x.next() {
		lo := x.cur.lo
		for j.ok && j.cur.hi <= lo {
			j.next()
		}
		for k := j.fork(); k.ok && k.cur.lo < x.cur.hi; k.next() {
			if k.cur.lo > lo {
				out.push(span{lo, k.cur.lo})
			}
			lo = max(lo, k.cur.hi)
		}
		if lo < x.cur.hi {
			out.push(span{lo, x.cur.hi})
		}
	}
	return out
}

// spanCursor is clipLength's walk over a packed list: windows visited in
// increasing order of their starts.
type spanCursor struct{ it spanIter }

func (q *spanSeq) cursor() *spanCursor { return &spanCursor{it: q.iter()} }

// clip returns how much of the spans lies in [lo, hi).
func (c *spanCursor) clip(lo, hi int64) int64 {
	for c.it.ok && c.it.cur.hi <= lo {
		c.it.next()
	}
	var n int64
	for k := c.it.fork(); k.ok && k.cur.lo < hi; k.next() {
		n += min(k.cur.hi, hi) - max(k.cur.lo, lo)
	}
	return n
}

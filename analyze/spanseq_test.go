package analyze

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The slice operations the packed ones replace, as they were: the
// reference the packed ones are held to.

// intersect returns the intersection of two merged span lists.
func intersect(a, b []span) []span {
	var out []span
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo < hi {
			out = append(out, span{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// clipLength returns how much of merged spans s lies in [lo, hi), starting
// the search at s[*from] and advancing *from past spans that end before lo;
// windows must be visited in increasing lo order for the cursor to be valid.
func clipLength(s []span, from *int, lo, hi int64) int64 {
	for *from < len(s) && s[*from].hi <= lo {
		*from++
	}
	var n int64
	for k := *from; k < len(s) && s[k].lo < hi; k++ {
		n += min(s[k].hi, hi) - max(s[k].lo, lo)
	}
	return n
}

// subtract returns the parts of merged spans a not in merged spans b.
func subtract(a, b []span) []span {
	if len(b) == 0 {
		return a // spans are not changed once merged: no copy needed
	}
	var out []span
	j := 0
	for _, x := range a {
		lo := x.lo
		for j < len(b) && b[j].hi <= lo {
			j++
		}
		for k := j; k < len(b) && b[k].lo < x.hi; k++ {
			if b[k].lo > lo {
				out = append(out, span{lo, b[k].lo})
			}
			lo = max(lo, b[k].hi)
		}
		if lo < x.hi {
			out = append(out, span{lo, x.hi})
		}
	}
	return out
}

// randomSpans returns n spans: in order of their starts (mode 0), nearly
// (1), or in none (2).
func randomSpans(rng *rand.Rand, n int, mode int) []span {
	var out []span
	at := int64(rng.IntN(100))
	for range n {
		lo := at + rng.Int64N(40)
		switch mode {
		case 1:
			lo -= rng.Int64N(4)
		case 2:
			lo = rng.Int64N(int64(40*n + 1))
		}
		out = append(out, span{lo, lo + rng.Int64N(30)})
		at = max(at, lo)
	}
	return out
}

func unpack(q *spanSeq) []span {
	var out []span
	for it := q.iter(); it.ok; it.next() {
		out = append(out, it.cur)
	}
	return out
}

// TestSpanSeqIsUnion: spans merged as they come, in order or not, a
// communicator at a time and then together, are union's; intersections,
// differences and clipped lengths of the packed lists are the slices'.
func TestSpanSeqIsUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	var spilled int64
	for trial := range 500 {
		// A quarter of the trials with long lists, spilled as they fill
		// (chunks of 4 KiB and more).
		var sp *logSpill
		n := 60
		if trial%4 == 1 {
			sp, n = &logSpill{budget: 1, open: tempSpill}, 3000
			defer func() { spilled += sp.size; sp.close() }()
		}
		var all []span
		var qs []*spanSeq
		for range 1 + rng.IntN(3) {
			p := randomSpans(rng, rng.IntN(n), trial%3)
			u := spanUnion{sp: sp}
			for _, x := range p {
				u.add(x)
			}
			q := u.seq()
			if want := union(slices.Clone(p)); !slices.Equal(unpack(q), want) || q.length() != length(want) {
				t.Fatalf("trial %d: merged as they came %v, union %v", trial, unpack(q), want)
			}
			all = append(all, p...)
			qs = append(qs, q)
		}
		a := union(slices.Clone(all))
		qa := mergeSeqs(sp, qs...)
		if !slices.Equal(unpack(qa), a) {
			t.Fatalf("trial %d: merged lists %v, union %v", trial, unpack(qa), a)
		}
		b := union(randomSpans(rng, rng.IntN(n), 2))
		qb := packSpans(sp, b)
		if got, want := unpack(intersectSeq(sp, qa, qb)), intersect(a, b); !slices.Equal(got, want) {
			t.Fatalf("trial %d: intersection %v, want %v", trial, got, want)
		}
		if got, want := unpack(subtractSeq(sp, qa, qb)), subtract(a, b); !slices.Equal(got, want) {
			t.Fatalf("trial %d: difference %v, want %v", trial, got, want)
		}
		cur, from := qa.cursor(), 0
		for lo := int64(-20); lo < int64(40*n); lo += rng.Int64N(90) + 1 {
			hi := lo + rng.Int64N(200)
			if got, want := cur.clip(lo, hi), clipLength(a, &from, lo, hi); got != want {
				t.Fatalf("trial %d: [%d, %d) holds %d ns, want %d", trial, lo, hi, got, want)
			}
		}
	}
	t.Cleanup(func() {
		if spilled == 0 {
			t.Errorf("no list was spilled: the spilled case is not tested")
		}
	})
}

// TestSpanSeqLongSpilled: lists long enough to fill chunks of the
// largest size, spilled, so that an iterator's read-back buffer is reused
// from one chunk to the next: clipping windows and subtracting across
// the chunks' boundaries (where a scan ahead reads the next chunk while
// the walk is still on the last) give the slices' answers.
func TestSpanSeqLongSpilled(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 3))
	sp := &logSpill{budget: 1, open: tempSpill}
	defer sp.close()
	// Gaps and lengths of 2-3 varint bytes each: about 5 MB packed.
	spans := func(n int, gap, long int64) []span {
		out := make([]span, n)
		at := int64(0)
		for i := range out {
			at += rng.Int64N(gap)
			out[i] = span{at, at + 1 + rng.Int64N(long)}
			at = out[i].hi
		}
		return out
	}
	a := spans(1_000_000, 1<<16, 1<<20) // each over several of b
	b := spans(2_000_000, 1<<14, 1<<12)
	qa, qb := packSpans(sp, a), packSpans(sp, b)
	if sp.size < 4*callLogChunk {
		t.Fatalf("%d bytes spilled: the lists fill too few chunks to test", sp.size)
	}
	if got, want := unpack(subtractSeq(sp, qa, qb)), subtract(a, b); !slices.Equal(got, want) {
		t.Fatalf("difference: %d spans, want %d", len(got), len(want))
	}
	cur, from := qa.cursor(), 0
	end := a[len(a)-1].hi
	for lo := int64(0); lo < end; lo += 500_000 + rng.Int64N(200_000) {
		hi := lo + 400_000 + rng.Int64N(400_000) // windows overlap the next
		if got, want := cur.clip(lo, hi), clipLength(a, &from, lo, hi); got != want {
			t.Fatalf("[%d, %d) holds %d ns, want %d", lo, hi, got, want)
		}
	}
}

package analyze

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/commprof/commprof/internal/busbw"
	"github.com/commprof/commprof/internal/units"
)

// Collective groups (op, algorithm, size) and ops: their times,
// bandwidths and waits.

type collKey struct {
	name, algo int32
	bucket     int
}

// benchAcc gathers, per collective group, the time per call as a
// benchmark measures it (nccl-tests, commprof bench): each rank's timed
// loops' length over the calls in them, the slowest rank's. Groups whose
// calls share a timed loop with other groups' are left out.
type benchAcc struct {
	timed   map[int32][]span // by rank: its timed regions
	regions map[benchRegion]*benchLoop
}

type benchRegion struct{ rank, region int32 }

type benchLoop struct {
	key   collKey
	n     int64
	mixed bool
}

func newBenchAcc(ranks []*RankSummarizer) *benchAcc {
	b := &benchAcc{timed: map[int32][]span{}, regions: map[benchRegion]*benchLoop{}}
	for _, rs := range ranks {
		if len(rs.timed) > 0 {
			b.timed[int32(rs.rank)] = rs.timed
		}
	}
	return b
}

func (b *benchAcc) add(calls []callRec) {
	if len(b.timed) == 0 {
		return
	}
	for _, c := range calls {
		if c.untimed {
			continue
		}
		j, ok := timedRegion(b.timed[c.rank], c)
		if !ok {
			continue
		}
		k := collKey{c.name, c.algo, SizeBucket(c.bytes)}
		a := b.regions[benchRegion{c.rank, j}]
		if a == nil {
			b.regions[benchRegion{c.rank, j}] = &benchLoop{key: k, n: 1}
			continue
		}
		a.mixed = a.mixed || a.key != k
		a.n++
	}
}

// times returns each group's time per call, nil when no calls were in
// timed loops.
func (b *benchAcc) times() map[collKey]float64 {
	if len(b.regions) == 0 {
		return nil
	}
	type sums struct{ span, n int64 }
	per := map[collKey]map[int32]*sums{}
	bad := map[collKey]bool{}
	for key, a := range b.regions {
		if a.mixed {
			bad[a.key] = true
			continue
		}
		g := b.timed[key.rank][key.region]
		if per[a.key] == nil {
			per[a.key] = map[int32]*sums{}
		}
		x := per[a.key][key.rank]
		if x == nil {
			x = &sums{}
			per[a.key][key.rank] = x
		}
		x.span += g.hi - g.lo
		x.n += a.n
	}
	out := map[collKey]float64{}
	for k, m := range per {
		if bad[k] {
			continue
		}
		var worst float64
		for _, x := range m {
			worst = max(worst, float64(x.span)/float64(x.n))
		}
		out[k] = worst
	}
	return out
}

func (s *Summarizer) collStats(src *callSource, cen *callCensus) ([]CollStats, []OpStats) {
	type acc struct {
		st       CollStats
		durs     distAcc
		perCall  *blockMeans // each call's mean time over its ranks, in call order
		transfer float64
		ranksN   map[int]int
		commN    int // the largest communicator the group's calls ran on
	}
	sizes, bench := cen.sizes, cen.bench
	groups := map[collKey]*acc{}
	src.each(func(calls []callRec, inst [][2]int, waits []int64) {
		for _, in := range inst {
			if untimed(calls, in) {
				continue
			}
			c0 := calls[in[0]]
			k := collKey{c0.name, c0.algo, SizeBucket(c0.bytes)}
			a := groups[k]
			if a == nil {
				a = &acc{ranksN: map[int]int{}}
				groups[k] = a
			}
			a.st.Calls++
			a.st.Bytes += c0.bytes
			a.ranksN[in[1]-in[0]]++
			a.commN = max(a.commN, sizes[c0.comm])
			last := calls[in[0]].start
			for _, c := range calls[in[0]:in[1]] {
				last = max(last, c.start)
			}
			for j := in[0]; j < in[1]; j++ {
				c := calls[j]
				a.durs.add(c.dur)
				a.st.WaitNS += waits[j]
				a.transfer += float64(max(c.start+c.dur-max(last, c.start), 0))
			}
		}
	})
	// The second pass: the calls' series, now that their number is
	// known, and the durations around the percentiles of large groups.
	for _, a := range groups {
		a.perCall = newBlockMeans(int(a.st.Calls))
		a.durs.needsSecond()
	}
	src.each(func(calls []callRec, inst [][2]int, _ []int64) {
		for _, in := range inst {
			if untimed(calls, in) {
				continue
			}
			c0 := calls[in[0]]
			a := groups[collKey{c0.name, c0.algo, SizeBucket(c0.bytes)}]
			var callSum int64
			for _, c := range calls[in[0]:in[1]] {
				callSum += c.dur
				if a.durs.second {
					a.durs.addSecond(c.dur)
				}
			}
			a.perCall.add(float64(callSum) / float64(in[1]-in[0]))
		}
	})
	var out []CollStats
	ops := map[string]*OpStats{}
	var total int64
	for k, a := range groups {
		st := a.st
		st.Op, st.Algo, st.Bucket, st.BucketLbl = s.str(k.name), s.str(k.algo), k.bucket, units.Bucket(k.bucket)
		best := 0
		for n, c := range a.ranksN {
			if c > a.ranksN[best] || (c == a.ranksN[best] && n > best) {
				best = n
			}
		}
		st.Ranks = max(best, a.commN)
		// The ranks' events of one call are not independent samples (one
		// hiccup delays them all): the blocks are of calls.
		st.TimeSpread = a.perCall.spread()
		st.Time = a.durs.dist()
		if st.Time.Mean > 0 && st.Calls > 0 {
			st.AlgBWGBps = float64(st.Bytes) / float64(st.Calls) / st.Time.Mean
			st.BusBWGBps = st.AlgBWGBps * busbw.Factor(st.Op, st.Ranks)
		}
		if st.Time.N > 0 {
			st.TransferNS = a.transfer / float64(st.Time.N)
		}
		if st.TransferNS > 0 && st.Calls > 0 {
			st.TransferBusBWGBps = float64(st.Bytes) / float64(st.Calls) / st.TransferNS * busbw.Factor(st.Op, st.Ranks)
		}
		if t := bench[k]; t > 0 && st.Calls > 0 {
			// A benchmark's timed loop: as it measures itself.
			st.AlgBWGBps = float64(st.Bytes) / float64(st.Calls) / t
			st.BusBWGBps = st.AlgBWGBps * busbw.Factor(st.Op, st.Ranks)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, cmpColl)
	// Sum the ops over the sorted groups, so that the floating-point sums
	// are the same on every read of a run.
	for _, st := range out {
		o := ops[st.Op]
		if o == nil {
			o = &OpStats{Op: st.Op}
			ops[st.Op] = o
		}
		o.Calls += st.Calls
		o.Bytes += st.Bytes
		o.TimeNS += st.Time.Sum
		o.WaitNS += st.WaitNS
		o.BusBWGBps += st.BusBWGBps * float64(st.Bytes) // weighted, divided below
		o.TransferBusBWGBps += st.TransferBusBWGBps * float64(st.Bytes)
		o.MeanNS += float64(st.Time.N) // events, divided below
		total += st.Time.Sum
	}
	var opl []OpStats
	for _, o := range ops {
		if o.Bytes > 0 {
			o.BusBWGBps /= float64(o.Bytes)
			o.TransferBusBWGBps /= float64(o.Bytes)
		} else {
			o.BusBWGBps, o.TransferBusBWGBps = 0, 0
		}
		if o.MeanNS > 0 {
			o.MeanNS = float64(o.TimeNS) / o.MeanNS
		}
		if total > 0 {
			o.Share = float64(o.TimeNS) / float64(total)
		}
		opl = append(opl, *o)
	}
	sort.Slice(opl, func(i, j int) bool {
		if opl[i].TimeNS != opl[j].TimeNS {
			return opl[i].TimeNS > opl[j].TimeNS
		}
		return opl[i].Op < opl[j].Op
	})
	return orEmpty(out), orEmpty(opl)
}

// cmpColl orders collective groups by op, algorithm and size bucket.
func cmpColl(a, b CollStats) int {
	return cmp.Or(strings.Compare(a.Op, b.Op), strings.Compare(a.Algo, b.Algo), cmp.Compare(a.Bucket, b.Bucket))
}

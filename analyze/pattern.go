package analyze

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"
	"strings"
)

// patSamples is how many calls of each op, algorithm and communicator are
// classified. Every rank samples the same calls: the first ones it sees.
const patSamples = 3

type patKey struct{ comm, name, algo int32 }

// patAcc holds the peers this rank sent to in each sampled call. Point-to-
// point traffic (algorithm "direct") is one sample over the whole run,
// since its shape shows across calls, not within one.
type patAcc struct {
	seqs  []int64
	peers [][]int32
}

func (rs *RankSummarizer) pattern(comm, name, algo int32, seq int64, peer int32) {
	if peer < 0 {
		return
	}
	k := patKey{comm, name, algo}
	a := rs.lastPat
	if a == nil || rs.lastPatKey != k {
		a = rs.patterns[k]
		if a == nil {
			a = &patAcc{}
			rs.patterns[k] = a
		}
		rs.lastPat, rs.lastPatKey = a, k
	}
	if algo == rs.s.direct {
		seq = -1
	}
	i := slices.Index(a.seqs, seq)
	if i < 0 {
		if len(a.seqs) >= patSamples {
			return
		}
		a.seqs = append(a.seqs, seq)
		a.peers = append(a.peers, nil)
		i = len(a.seqs) - 1
	}
	if !slices.Contains(a.peers[i], peer) {
		a.peers[i] = append(a.peers[i], peer)
	}
}

// patterns merges the ranks' samples into one edge set per sampled call
// and classifies it.
func (s *Summarizer) patterns(ranks []*RankSummarizer, src *callSource) []Pattern {
	type callKey struct {
		k   patKey
		seq int64
	}
	edges := map[callKey]map[[2]int]bool{}
	var order []callKey
	for _, rs := range ranks {
		for k, a := range rs.patterns {
			for i, seq := range a.seqs {
				ck := callKey{k, seq}
				if edges[ck] == nil {
					edges[ck] = map[[2]int]bool{}
					order = append(order, ck)
				}
				for _, p := range a.peers[i] {
					edges[ck][[2]int{rs.rank, int(p)}] = true
				}
			}
		}
	}
	// The members of a call are the ranks with an event for it.
	members := map[callKey][]int{}
	if len(edges) == 0 {
		return []Pattern{}
	}
	src.each(func(calls []callRec, _ [][2]int, _ []int64) {
		for _, c := range calls {
			ck := callKey{patKey{c.comm, c.name, c.algo}, c.seq}
			if edges[ck] != nil && !slices.Contains(members[ck], int(c.rank)) {
				members[ck] = append(members[ck], int(c.rank))
			}
		}
	})
	type agg struct {
		p      Pattern
		counts map[string]int
	}
	byKey := map[patKey]*agg{}
	sort.Slice(order, func(i, j int) bool { return order[i].seq < order[j].seq })
	for _, ck := range order {
		var es [][2]int
		for e := range edges[ck] {
			es = append(es, e)
		}
		sort.Slice(es, func(i, j int) bool {
			if es[i][0] != es[j][0] {
				return es[i][0] < es[j][0]
			}
			return es[i][1] < es[j][1]
		})
		mem := members[ck]
		for _, e := range es {
			for _, r := range e {
				if !slices.Contains(mem, r) {
					mem = append(mem, r)
				}
			}
		}
		a := byKey[ck.k]
		if a == nil {
			a = &agg{p: Pattern{Op: s.str(ck.k.name), Algo: s.str(ck.k.algo), Comm: s.str(ck.k.comm), Ranks: len(mem), Edges: es}, counts: map[string]int{}}
			byKey[ck.k] = a
		}
		a.counts[Classify(mem, es)]++
		a.p.Sampled++
	}
	out := []Pattern{}
	for _, a := range byKey {
		best := ""
		for name, c := range a.counts {
			if c > a.counts[best] || (c == a.counts[best] && name < best) {
				best = name
			}
		}
		a.p.Pattern, a.p.Agree = best, a.counts[best]
		out = append(out, a.p)
	}
	slices.SortFunc(out, func(a, b Pattern) int {
		return cmp.Or(strings.Compare(a.Op, b.Op), strings.Compare(a.Algo, b.Algo), strings.Compare(a.Comm, b.Comm))
	})
	return out
}

// labelPatterns names each op's pattern after its most used algorithm's,
// and labels the per-op matrices with it.
func labelPatterns(sum *Summary) {
	timeOf := map[[2]string]int64{}
	for _, c := range sum.Collectives {
		timeOf[[2]string{c.Op, c.Algo}] += c.Time.Sum
	}
	best := map[string]Pattern{}
	for _, p := range sum.Patterns {
		b, ok := best[p.Op]
		if !ok || timeOf[[2]string{p.Op, p.Algo}] > timeOf[[2]string{b.Op, b.Algo}] {
			best[p.Op] = p
		}
	}
	for i := range sum.Ops {
		sum.Ops[i].Pattern = best[sum.Ops[i].Op].Pattern
	}
	for i := range sum.OpMatrices {
		sum.OpMatrices[i].Pattern = best[sum.OpMatrices[i].Op].Pattern
	}
}

// Pattern names, as Classify returns them.
const (
	PatternRing          = "ring"
	PatternChain         = "chain"
	PatternTree          = "tree"
	PatternButterfly     = "butterfly"
	PatternDissemination = "dissemination"
	PatternStar          = "star"
	PatternAllToAll      = "all-to-all"
	PatternDirect        = "direct"
	PatternNone          = "none"
	PatternOther         = "other"
)

// Classify names the shape of one call's messages: members are the ranks
// taking part, edges the (sender, receiver) pairs. Ranks are renumbered
// 0..m-1 in increasing order, so a sub-communicator's call classifies like
// the world's.
func Classify(members []int, edges [][2]int) string {
	mem := slices.Clone(members)
	for _, e := range edges {
		for _, r := range e {
			if !slices.Contains(mem, r) {
				mem = append(mem, r)
			}
		}
	}
	slices.Sort(mem)
	m := len(mem)
	if len(edges) == 0 {
		return PatternNone
	}
	if m <= 2 {
		return PatternDirect
	}
	idx := map[int]int{}
	for i, r := range mem {
		idx[r] = i
	}
	out := make([][]int, m)
	in := make([]int, m)
	und := make([]map[int]bool, m)
	for i := range und {
		und[i] = map[int]bool{}
	}
	directed := map[[2]int]bool{}
	for _, e := range edges {
		a, b := idx[e[0]], idx[e[1]]
		if a == b || directed[[2]int{a, b}] {
			continue
		}
		directed[[2]int{a, b}] = true
		out[a] = append(out[a], b)
		in[b]++
		und[a][b], und[b][a] = true, true
	}
	nd := len(directed)
	symmetric := true
	for e := range directed {
		if !directed[[2]int{e[1], e[0]}] {
			symmetric = false
			break
		}
	}
	undEdges := 0
	maxDeg := 0
	for _, u := range und {
		undEdges += len(u)
		maxDeg = max(maxDeg, len(u))
	}
	undEdges /= 2
	connected := isConnected(und)

	switch {
	case nd == m*(m-1):
		return PatternAllToAll
	case isRing(out, in, m, symmetric, und):
		return PatternRing
	case isStar(und, m):
		return PatternStar
	}
	if connected && undEdges == m-1 {
		root := -1
		for i := range m {
			if in[i] == 0 {
				root = i
			}
		}
		if maxDeg <= 2 && root >= 0 && len(und[root]) == 1 {
			return PatternChain
		}
		return PatternTree
	}
	pow2 := func(x int) bool { return x > 0 && x&(x-1) == 0 }
	xorOK, distOK := 0, true
	for e := range directed {
		if pow2(e[0] ^ e[1]) {
			xorOK++
		}
		if !pow2(((e[1] - e[0]) + m) % m) {
			distOK = false
		}
	}
	lg := bits.Len(uint(m - 1))
	if symmetric && 2*xorOK >= nd {
		ok := true
		for _, u := range und {
			if len(u) > lg+1 {
				ok = false
			}
		}
		if ok {
			return PatternButterfly
		}
	}
	if !symmetric && distOK {
		return PatternDissemination
	}
	return PatternOther
}

func isConnected(und []map[int]bool) bool {
	seen := make([]bool, len(und))
	stack := []int{0}
	seen[0] = true
	n := 1
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for y := range und[x] {
			if !seen[y] {
				seen[y] = true
				n++
				stack = append(stack, y)
			}
		}
	}
	return n == len(und)
}

// isRing: one directed cycle through every rank, or the bidirectional
// ring (every rank exchanging with exactly its two neighbours in rank
// order; any other 2-regular graph, such as recursive doubling on 4 ranks,
// is not called a ring).
func isRing(out [][]int, in []int, m int, symmetric bool, und []map[int]bool) bool {
	uni := true
	for i := range m {
		if len(out[i]) != 1 || in[i] != 1 {
			uni = false
			break
		}
	}
	if uni {
		x, steps := 0, 0
		for {
			x = out[x][0]
			steps++
			if x == 0 || steps > m {
				break
			}
		}
		return x == 0 && steps == m
	}
	if !symmetric || m < 3 {
		return false
	}
	for i, u := range und {
		if len(u) != 2 || !u[(i+1)%m] || !u[(i+m-1)%m] {
			return false
		}
	}
	return true
}

func isStar(und []map[int]bool, m int) bool {
	for h := range m {
		if len(und[h]) != m-1 {
			continue
		}
		ok := true
		for i := range m {
			if i != h && len(und[i]) != 1 {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

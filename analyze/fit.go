package analyze

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/commprof/commprof/internal/busbw"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// Fit is the alpha-beta-gamma (Hockney) model of the run's network and
// reductions: a collective of n bytes on p ranks takes a·Alpha + b·Beta +
// c·Gamma, with a, b, c from its algorithm's formula (Model) and each
// phase scaled by how contended its ranks' cores were (Contention).
// docs/metrics.md explains how each is fitted and when a fit is usable.
type Fit struct {
	// From received messages, for reference: each message's transfer
	// time (recv time minus the wait for the first byte) against bytes,
	// by least squares. On a network-bound link this is the link; on a
	// CPU-bound host it misses the sender's copy (docs/metrics.md).
	Messages      int64   `json:"messages"`
	MsgAlphaNS    float64 `json:"msg_alpha_ns"`
	MsgBetaNSPerB float64 `json:"msg_beta_ns_per_byte"`
	MsgR2         float64 `json:"msg_r2"`
	// Gamma from the reduction kernels' own time (reduce events), per
	// byte, uncontended; or fitted with Alpha and Beta when the run has no
	// reduce events.
	Reduces     int64   `json:"reduces"`
	GammaNSPerB float64 `json:"gamma_ns_per_byte"`
	GammaFrom   string  `json:"gamma_from"` // "reductions", "calls" or ""
	// Alpha and Beta from the collective calls' times after their last
	// member arrived, averaged per (ranks, algorithm, size): non-negative
	// least squares on the relative error, so every size counts alike.
	Calls      int64   `json:"calls"`
	Sizes      int     `json:"sizes"` // distinct buffer sizes among the calls
	AlphaNS    float64 `json:"alpha_ns"`
	BetaNSPerB float64 `json:"beta_ns_per_byte"` // within a host
	// WithinHost says some calls' steps stayed within a host, so that
	// BetaNSPerB was fitted (it may be 0); without any, steps within a
	// host are given the cost between hosts.
	WithinHost bool `json:"within_host"`
	// AlphaNetNS is the cost per step that crosses hosts (the network's
	// latency); 0 when the calls never crossed hosts.
	AlphaNetNS float64 `json:"alpha_net_ns"`
	// BetaNetNSPerB is the cost per byte of messages between hosts, per
	// message sharing a host's link; 0 when the calls never crossed hosts.
	BetaNetNSPerB float64 `json:"beta_net_ns_per_byte"`
	LinkGBps      float64 `json:"link_gbps"` // 1/beta between hosts (within one, for one host), when usable
	// CallR2 is R² of the model's log time against the measured log time
	// over the (ranks, algorithm, size) groups, each predicted by the
	// model without it (the per-size BetaCurve drawn through the others);
	// MedianError the median of |model - measured| / measured over them.
	// A fit whose calls crossed hosts is a model of the link, and is
	// judged by the groups that crossed it.
	CallR2      float64 `json:"call_r2"`
	MedianError float64 `json:"median_error"`
	// BetaCurve is the cost per byte by message size, where the calls
	// span enough message sizes to calibrate it (docs/metrics.md): memory
	// and caches make large messages cost more per byte than small ones.
	// Predictions use it in place of BetaNSPerB.
	BetaCurve  []BetaPoint `json:"beta_curve,omitempty"`
	RankCounts []int       `json:"rank_counts"` // communicator sizes the calls had
	// Usable says whether the fit has the signal to be shown and to
	// project from; Reason says why not, and how to get one.
	Usable bool   `json:"usable"`
	Reason string `json:"reason,omitempty"`
	// Source is where the fit came from: "run" (this run's own calls),
	// "runs" (pooled), or a calibration file.
	Source string `json:"source,omitempty"`
}

// Contention describes where the ranks ran: with Hosts hosts of
// CoresPerHost cores each, a phase of a collective in which active ranks
// (spread over the hosts) exchange messages takes
// ceil(active/Hosts/CoresPerHost) times as long on the cores as on idle
// ones: a synchronous step ends only once each of its ranks has run, so
// the scheduler's turns count, not the average load. Ranks with nothing to
// do in a phase (the extra ranks of a fold to a power of two, waiting for
// the result) block or, over shared memory, sleep after a brief spin, and
// leave the cores to the rest: counting every member put a held-out
// 3-rank Rabenseifner over TCP on 2 cores 64-160% too slow
// (docs/metrics.md, "Contention"). Ranks sit on hosts in blocks of
// RanksPerHost (ranks 0..k-1 on the first, and so on), which says which
// messages cross between hosts. The zero value is one host with no
// contention.
type Contention struct {
	Hosts        int `json:"hosts"`
	CoresPerHost int `json:"cores_per_host"`
	RanksPerHost int `json:"ranks_per_host"`
}

// Factor is the slowdown of a phase in which active ranks run.
func (c Contention) Factor(active int) float64 {
	if c.Hosts < 1 || c.CoresPerHost < 1 {
		return 1
	}
	return max(1, math.Ceil(float64(active)/float64(c.Hosts)/float64(c.CoresPerHost)))
}

// linReg accumulates a simple least-squares line y = a + b x.
type linReg struct{ n, sx, sy, sxx, sxy, syy float64 }

func (l *linReg) add(x, y float64) {
	l.n++
	l.sx += x
	l.sy += y
	l.sxx += x * x
	l.sxy += x * y
	l.syy += y * y
}

// scaledY returns l with every y multiplied by k.
func (l linReg) scaledY(k float64) linReg {
	l.sy *= k
	l.sxy *= k
	l.syy *= k * k
	return l
}

func (l *linReg) merge(o linReg) {
	l.n += o.n
	l.sx += o.sx
	l.sy += o.sy
	l.sxx += o.sxx
	l.sxy += o.sxy
	l.syy += o.syy
}

// solve returns the intercept, slope and R^2; with one distinct x the
// slope is 0 and the intercept the mean.
func (l linReg) solve() (a, b, r2 float64) {
	if l.n == 0 {
		return 0, 0, 0
	}
	vx := l.sxx - l.sx*l.sx/l.n
	vy := l.syy - l.sy*l.sy/l.n
	if vx <= 1e-9*math.Max(1, l.sxx) {
		return l.sy / l.n, 0, 0
	}
	cxy := l.sxy - l.sx*l.sy/l.n
	b = cxy / vx
	a = (l.sy - b*l.sx) / l.n
	if vy > 0 {
		r2 = cxy * cxy / (vx * vy)
	}
	return a, b, r2
}

// callGroup is one (ranks, algorithm, size, contention) group of calls:
// its model coefficients and mean time after the last arrival.
type callGroup struct {
	A, B, C float64 // contended coefficients of alpha, beta within a host, gamma
	AN, BN  float64 // coefficients of alpha and beta between hosts
	Msg     float64 // the largest message one of its steps sends
	Bytes   int64
	Ranks   int
	SumT    float64
	N       int64
}

// fitSums holds what the fit needs, in a form that adds across runs.
type fitSums struct {
	link   linReg // messages: transfer ns against bytes
	red    linReg // reductions: ns (uncontended) against bytes
	groups []callGroup
	ranks  []int
}

func (f *fitSums) merge(o *fitSums) {
	f.link.merge(o.link)
	f.red.merge(o.red)
	f.groups = append(f.groups, o.groups...)
	for _, r := range o.ranks {
		if !slices.Contains(f.ranks, r) {
			f.ranks = append(f.ranks, r)
		}
	}
	slices.Sort(f.ranks)
}

// Usability thresholds: a fit is shown, and projected from, only with
// calls of at least minSizes sizes spanning minSpan times, a positive
// beta and an R² of at least minR2.
const (
	minSizes = 3
	minSpan  = 16
	minR2    = 0.5
)

// howToFit is what a fit without signal tells the user to do.
const howToFit = "run commprof calibrate on this machine or cluster and pass its model file to predict and report (--model)"

// solve fits the model: gamma from the reductions, then alpha and beta
// (and gamma, if no reduction was timed) from the call groups.
func (f *fitSums) solve() Fit {
	ft := Fit{Messages: int64(f.link.n), Reduces: int64(f.red.n), RankCounts: orEmpty(slices.Clone(f.ranks)), Source: "run"}
	ft.MsgAlphaNS, ft.MsgBetaNSPerB, ft.MsgR2 = f.link.solve()
	var sizes []int64
	for _, g := range f.groups {
		ft.Calls += g.N
		if g.Bytes > 0 && !slices.Contains(sizes, g.Bytes) {
			sizes = append(sizes, g.Bytes)
		}
	}
	ft.Sizes = len(sizes)
	if f.red.n > 0 {
		c0, slope, _ := f.red.solve()
		ft.GammaNSPerB, ft.GammaFrom = slope, "reductions"
		if slope <= 0 || c0 < 0 {
			// One size, or a kernel whose fixed cost dominates: the
			// mean cost per byte.
			ft.GammaNSPerB = f.red.sy / math.Max(f.red.sx, 1)
		}
	}
	var groups []callGroup
	crossed := false // some call sent bytes between hosts
	for _, g := range f.groups {
		if g.N > 0 && g.SumT > 0 {
			groups = append(groups, g)
			crossed = crossed || g.BN > 0
			ft.WithinHost = ft.WithinHost || g.B > 0
		}
	}
	if len(groups) > 0 {
		ft.AlphaNS, ft.AlphaNetNS, ft.BetaNSPerB, ft.BetaNetNSPerB, ft.GammaNSPerB = fitGroups(groups, ft.GammaNSPerB, ft.GammaFrom != "")
		if ft.GammaFrom == "" && ft.GammaNSPerB > 0 {
			ft.GammaFrom = "calls"
		}
		ft.BetaCurve = betaCurve(groups, ft)
		ft.CallR2, ft.MedianError = groupQuality(groups, ft, crossed)
	}
	slices.Sort(sizes)
	switch {
	case len(groups) == 0:
		ft.Reason = "the run has no collective calls the model covers; " + howToFit
	case len(sizes) < minSizes || sizes[len(sizes)-1] < minSpan*max(sizes[0], 1):
		ft.Reason = fmt.Sprintf("the calls have %d size(s)%s, and a fit needs at least %d spanning %dx or more; %s",
			len(sizes), spanOf(sizes), minSizes, minSpan, howToFit)
	case crossed && ft.BetaNetNSPerB <= 0:
		// The link is what a multi-host fit is for: a beta within hosts
		// is not the network's.
		ft.Reason = "the calls cross hosts, but their times do not grow with the bytes that cross (beta between hosts <= 0); " + howToFit
	case !crossed && ft.BetaNSPerB <= 0:
		ft.Reason = "the calls' times do not grow with their size (beta <= 0); " + howToFit
	case ft.CallR2 < minR2:
		ft.Reason = fmt.Sprintf("the model explains the calls' times poorly (R² %.2f, below %.1f); %s", ft.CallR2, minR2, howToFit)
	default:
		ft.Usable = true
		ft.LinkGBps = 1 / ft.betaNet()
	}
	return ft
}

func spanOf(sizes []int64) string {
	if len(sizes) < 2 {
		return ""
	}
	return fmt.Sprintf(" from %s to %s", units.Bytes(sizes[0]), units.Bytes(sizes[len(sizes)-1]))
}

// fitGroups fits alpha and the two betas (and gamma unless fixed) to the
// groups' mean times by non-negative least squares on relative errors:
// each group's equation a·α + b·β + bn·βnet + c·γ = T is divided by T. A
// beta no group's calls used (no call crossed hosts, say) stays 0.
func fitGroups(groups []callGroup, gamma float64, gammaFixed bool) (alpha, alphaNet, beta, betaNet, g float64) {
	n := 5
	if gammaFixed {
		n = 4
	}
	rows := make([][]float64, len(groups))
	ys := make([]float64, len(groups))
	for i, gr := range groups {
		t := gr.SumT / float64(gr.N)
		if gammaFixed {
			rows[i] = []float64{gr.A / t, gr.AN / t, gr.B / t, gr.BN / t}
			ys[i] = 1 - gr.C*gamma/t
		} else {
			rows[i] = []float64{gr.A / t, gr.AN / t, gr.B / t, gr.BN / t, gr.C / t}
			ys[i] = 1
		}
	}
	x := robustNNLS(rows, ys, n)
	if gammaFixed {
		return x[0], x[1], x[2], x[3], gamma
	}
	return x[0], x[1], x[2], x[3], x[4]
}

// robustNNLS minimizes the sum of absolute errors (not squares) by
// iteratively reweighted non-negative least squares, so that a few sizes
// that behave apart (the first kilobytes a shaped link lets through in a
// burst, a size that hits a cache) do not pull the fit off the rest.
func robustNNLS(a [][]float64, y []float64, n int) []float64 {
	x := nnls(a, y, n)
	w := make([]float64, len(a))
	wa := make([][]float64, len(a))
	wy := make([]float64, len(a))
	for iter := 0; iter < 30; iter++ {
		for i := range a {
			r := -y[i]
			for j := range n {
				r += a[i][j] * x[j]
			}
			w[i] = 1 / math.Sqrt(math.Max(math.Abs(r), 1e-4))
			wa[i] = make([]float64, n)
			for j := range n {
				wa[i][j] = a[i][j] * w[i]
			}
			wy[i] = y[i] * w[i]
		}
		x = nnls(wa, wy, n)
	}
	return x
}

// nnls solves min ||Ax - y|| with x >= 0 for a few unknowns by trying
// every subset of free variables (2^n least-squares solves).
func nnls(a [][]float64, y []float64, n int) []float64 {
	best := make([]float64, n)
	bestRes := math.Inf(1)
	for mask := 1; mask < 1<<n; mask++ {
		var idx []int
		for j := range n {
			if mask&(1<<j) != 0 {
				idx = append(idx, j)
			}
		}
		k := len(idx)
		// Normal equations over the chosen columns.
		m := make([][]float64, k)
		v := make([]float64, k)
		for p := range k {
			m[p] = make([]float64, k)
			for i := range a {
				v[p] += a[i][idx[p]] * y[i]
				for q := range k {
					m[p][q] += a[i][idx[p]] * a[i][idx[q]]
				}
			}
		}
		sol, ok := solveLinear(m, v)
		if !ok {
			continue
		}
		x := make([]float64, n)
		neg := false
		for p, j := range idx {
			x[j] = sol[p]
			neg = neg || sol[p] < 0
		}
		if neg {
			continue
		}
		var res float64
		for i := range a {
			d := -y[i]
			for j := range n {
				d += a[i][j] * x[j]
			}
			res += d * d
		}
		if res < bestRes {
			best, bestRes = x, res
		}
	}
	return best
}

// solveLinear solves m x = v by Gaussian elimination with partial pivoting.
func solveLinear(m [][]float64, v []float64) ([]float64, bool) {
	k := len(v)
	for c := range k {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		if math.Abs(m[p][c]) < 1e-300 {
			return nil, false
		}
		m[c], m[p] = m[p], m[c]
		v[c], v[p] = v[p], v[c]
		for r := c + 1; r < k; r++ {
			f := m[r][c] / m[c][c]
			for q := c; q < k; q++ {
				m[r][q] -= f * m[c][q]
			}
			v[r] -= f * v[c]
		}
	}
	x := make([]float64, k)
	for c := k - 1; c >= 0; c-- {
		s := v[c]
		for q := c + 1; q < k; q++ {
			s -= m[c][q] * x[q]
		}
		x[c] = s / m[c][c]
	}
	return x, true
}

// groupQuality returns R² in log time and the median relative error of
// the fit over the groups, each left out of the per-size curve it is
// judged by; with crossed, over the groups whose calls crossed hosts.
func groupQuality(groups []callGroup, ft Fit, crossed bool) (r2, medErr float64) {
	var logs, preds, errs []float64
	others := make([]callGroup, 0, len(groups))
	for i, g := range groups {
		if crossed && g.BN <= 0 {
			continue // a fit across hosts is judged by the calls across the link
		}
		t := g.SumT / float64(g.N)
		// Each group is judged by the model without it: the per-size
		// curve drawn through it would explain it whatever it was.
		loo := ft
		if ft.BetaCurve != nil {
			others = append(append(others[:0], groups[:i]...), groups[i+1:]...)
			loo.BetaCurve = betaCurve(others, ft)
		}
		p := g.A*loo.AlphaNS + g.AN*loo.alphaNet() + g.B*loo.betaAt(g.Msg) + g.BN*loo.betaNet() + g.C*loo.GammaNSPerB
		if t <= 0 || p <= 0 {
			continue
		}
		logs = append(logs, math.Log(t))
		preds = append(preds, math.Log(p))
		errs = append(errs, math.Abs(p-t)/t)
	}
	if len(logs) == 0 {
		return 0, 0
	}
	var mean float64
	for _, l := range logs {
		mean += l
	}
	mean /= float64(len(logs))
	var ssTot, ssRes float64
	for i := range logs {
		ssTot += (logs[i] - mean) * (logs[i] - mean)
		ssRes += (logs[i] - preds[i]) * (logs[i] - preds[i])
	}
	if ssTot > 0 {
		r2 = 1 - ssRes/ssTot
	}
	slices.Sort(errs)
	return r2, errs[(len(errs)-1)/2]
}

// phase is a part of a collective algorithm: Steps steps, each moving a
// message of Msg bytes and reducing Red bytes, with Active ranks busy.
// OneWay marks steps in which a rank only sends or only receives; in the
// others (exchanges, rings) every rank does both at once. Beta is the
// cost per byte of an exchange: where copies cost CPU time (loopback,
// shared memory) a one-way step moves its bytes at half that cost. Mask
// is the distance between partners (rank XOR Mask), or 0 for a ring's
// neighbours, which says which steps cross between hosts.
type phase struct {
	Steps    float64
	Msg, Red float64
	Active   int
	OneWay   bool
	Mask     int
}

// betaWays returns the factor of beta for the phase's bytes within a host.
func (x phase) betaWays() float64 {
	if x.OneWay {
		return 0.5
	}
	return 1
}

// crossing says whether the phase's steps cross between hosts, with ranks
// placed on hosts in blocks of con.RanksPerHost, and how many of its
// messages then share each host's link.
func (x phase) crossing(con Contention) (cross bool, flows float64) {
	k := con.RanksPerHost
	if con.Hosts < 2 || k < 1 {
		return false, 0
	}
	switch {
	case x.Mask == 0: // a ring: one neighbour per host block is on another host
		return true, 1
	case x.Mask >= k: // partners a block or more apart: every rank of a host talks across
		return true, float64(min(k, max(x.Active/con.Hosts, 1)))
	}
	return false, 0
}

// assumedAlgo is the algorithm assumed for a call whose algo is
// trace.AlgoUnknown.
var assumedAlgo = map[string]string{"allreduce": "ring", "allgather": "ring", "reducescatter": "ring", "broadcast": "tree", "reduce": "tree"}

// segmentBytes is the pipelining unit of the ring (collectives'
// DefaultTuning): a ring step's message is at most this long.
const segmentBytes = 1 << 20

// phases lays out op with algo on p ranks over n bytes as commprof's
// collectives run it; ok is false for pairs the model does not cover.
// Recursive doubling and Rabenseifner on a rank count that is not a power
// of two first fold the extra ranks in (a full-buffer send and reduction
// between pairs), run on the largest power of two below p, and unfold (a
// full-buffer send back).
func phases(op, algo string, p int, n float64) ([]phase, bool) {
	if algo == trace.AlgoUnknown {
		// The source does not name the algorithm and says so in its
		// source's missing: the op's standard shape is assumed.
		algo = assumedAlgo[op]
	}
	if p < 2 {
		return nil, op != ""
	}
	pp := 1 << (bits.Len(uint(p)) - 1) // largest power of two <= p
	rem := p - pp
	fp := float64(p)
	var fold []phase
	if rem > 0 {
		fold = []phase{{Steps: 1, Msg: n, Red: n, Active: 2 * rem, OneWay: true, Mask: 1}, {Steps: 1, Msg: n, Active: 2 * rem, OneWay: true, Mask: 1}}
	}
	seg := func(m float64) float64 {
		if k := math.Ceil(m / segmentBytes); k > 1 {
			return m / k
		}
		return m
	}
	// tree is a binomial tree's levels, one message of n bytes each.
	tree := func(red float64) []phase {
		var ph []phase
		for m := 1; m < p; m <<= 1 {
			ph = append(ph, phase{Steps: 1, Msg: n, Red: red, Active: p, OneWay: true, Mask: m})
		}
		return ph
	}
	switch op {
	case "allreduce":
		switch algo {
		case "ring":
			m := n / fp
			k := math.Max(1, math.Ceil(m/segmentBytes))
			return []phase{{Steps: (fp - 1) * k, Msg: seg(m), Red: seg(m), Active: p}, {Steps: (fp - 1) * k, Msg: seg(m), Active: p}}, true
		case "recursive_doubling":
			ph := fold
			for m := 1; m < pp; m <<= 1 {
				ph = append(ph, phase{Steps: 1, Msg: n, Red: n, Active: pp, Mask: m})
			}
			return ph, true
		case "rabenseifner":
			// Halving steps from the farthest partner in, each sending half
			// of what is left and reducing the half it keeps; then the
			// doubling steps back out, sending without reducing.
			ph := fold
			m, mask := n/2, pp/2
			for ; mask > 0 && len(ph) < 64; m, mask = m/2, mask/2 {
				ph = append(ph, phase{Steps: 2, Msg: m, Red: m / 2, Active: pp, Mask: mask})
			}
			return ph, true
		case "tree":
			return append(tree(n), tree(0)...), true
		}
	case "reducescatter":
		if algo == "ring" {
			m := n / fp
			return []phase{{Steps: fp - 1, Msg: m, Red: m, Active: p}}, true
		}
	case "allgather":
		if algo == "ring" {
			return []phase{{Steps: fp - 1, Msg: n / fp, Active: p}}, true
		}
	case "broadcast":
		if algo == "tree" {
			return tree(0), true
		}
	case "reduce":
		if algo == "tree" {
			return tree(n), true
		}
	}
	return nil, false
}

// Model returns the alpha, beta and gamma coefficients of op run with
// algo on p ranks over n bytes on one host's idle cores, per DESIGN.md's
// formulas; ok is false for pairs the model does not cover.
func Model(op, algo string, p int, n float64) (a, b, c float64, ok bool) {
	a, an, bl, bn, c, ok := terms(op, algo, p, n, Contention{})
	return a + an, bl + bn, c, ok
}

// ModelOn is Model with each phase scaled by the contention of the ranks
// active in it, the messages that cross between hosts counted apart.
func ModelOn(op, algo string, p int, n float64, con Contention) (a, b, c float64, ok bool) {
	a, an, bl, bn, c, ok := terms(op, algo, p, n, con)
	return a + an, bl + bn, c, ok
}

// terms returns the coefficients of alpha and beta within a host (a,
// bl), of alpha and beta between hosts (an, bn) and of gamma for op with
// algo on p ranks placed as con says. Work on a host's cores is scaled by
// their contention; bytes between hosts by how many messages share a
// host's link at once.
func terms(op, algo string, p int, n float64, con Contention) (a, an, bl, bn, c float64, ok bool) {
	ph, ok := phases(op, algo, p, n)
	for _, x := range ph {
		f := con.Factor(x.Active)
		c += f * x.Steps * x.Red
		if cross, flows := x.crossing(con); cross {
			an += x.Steps
			bn += x.Steps * x.Msg * flows
		} else {
			a += f * x.Steps
			bl += f * x.Steps * x.Msg * x.betaWays()
		}
	}
	return a, an, bl, bn, c, ok
}

// mainMsg is the largest message a step of op's algorithm sends: the
// size whose bandwidth sets its time.
func mainMsg(op, algo string, p int, n float64) float64 {
	ph, _ := phases(op, algo, p, n)
	var m float64
	for _, x := range ph {
		m = max(m, x.Msg)
	}
	return m
}

// BetaPoint is the cost per byte of messages of one size, as calibrated.
type BetaPoint struct {
	MsgBytes   float64 `json:"msg_bytes"`
	BetaNSPerB float64 `json:"beta_ns_per_byte"`
}

// betaAt is the cost per byte of a message of m bytes: the calibrated
// curve, interpolated in log size, or the constant beta without one.
func (f Fit) betaAt(m float64) float64 {
	c := f.BetaCurve
	if !f.WithinHost && f.BetaNSPerB <= 0 && f.BetaNetNSPerB > 0 {
		return f.BetaNetNSPerB // no calls within a host: the network's
	}
	if len(c) == 0 || m <= 0 {
		return f.BetaNSPerB
	}
	if m <= c[0].MsgBytes {
		return c[0].BetaNSPerB
	}
	for i := 1; i < len(c); i++ {
		if m <= c[i].MsgBytes {
			t := math.Log(m/c[i-1].MsgBytes) / math.Log(c[i].MsgBytes/c[i-1].MsgBytes)
			return c[i-1].BetaNSPerB + t*(c[i].BetaNSPerB-c[i-1].BetaNSPerB)
		}
	}
	return c[len(c)-1].BetaNSPerB
}

// Predict returns the model's time in ns for op with algo on p ranks on
// idle cores.
func (f Fit) Predict(op, algo string, p int, n float64) (float64, bool) {
	return f.PredictOn(op, algo, p, n, Contention{})
}

// CurvePoint is one point of the model's busbw curve: at Bytes per call,
// the model's busbw in GB/s.
type CurvePoint struct {
	Bytes int64
	GBps  float64
}

// BusBWCurve returns the model's busbw for op with algo on p ranks at each
// power of two from 8 bytes to at least upTo (and at least 1 MiB): bytes
// over the predicted time, times the op's nccl-tests factor, as the
// measured busbw is. Sizes where the model predicts no time are left out.
func (f Fit) BusBWCurve(op, algo string, p int, upTo int64) []CurvePoint {
	var out []CurvePoint
	for n := int64(8); n <= max(upTo, 1<<20); n *= 2 {
		t, _ := f.Predict(op, algo, p, float64(n))
		if t <= 0 {
			continue
		}
		out = append(out, CurvePoint{Bytes: n, GBps: float64(n) / t * busbw.Factor(op, p)})
	}
	return out
}

// PredictOn returns the model's time in ns for op with algo on p ranks
// sharing cores as con says; each phase's messages cost what the
// calibrated curve gives for their size, when the fit has one.
func (f Fit) PredictOn(op, algo string, p int, n float64, con Contention) (float64, bool) {
	ph, ok := phases(op, algo, p, n)
	var t float64
	for _, x := range ph {
		fc := con.Factor(x.Active)
		t += fc * x.Steps * x.Red * f.GammaNSPerB
		if cross, flows := x.crossing(con); cross {
			t += x.Steps * (f.alphaNet() + x.Msg*flows*f.betaNet())
		} else {
			t += fc * x.Steps * (f.AlphaNS + x.Msg*x.betaWays()*f.betaAt(x.Msg))
		}
	}
	return t, ok
}

// alphaNet is the cost per step between hosts, as betaNet.
func (f Fit) alphaNet() float64 {
	if f.AlphaNetNS > 0 || f.BetaNetNSPerB > 0 {
		return f.AlphaNetNS
	}
	return f.AlphaNS
}

// betaNet is the cost per byte between hosts: as fitted, or, when the
// model saw no calls across hosts, the cost within one (a calibration on
// one host cannot know its network).
func (f Fit) betaNet() float64 {
	if f.BetaNetNSPerB > 0 {
		return f.BetaNetNSPerB
	}
	return f.BetaNSPerB
}

// betaCurve derives the cost per byte at each message size from the
// groups: the beta that makes the model match a group, given alpha and
// gamma, at the group's main message size; the median per power of two.
// It needs groups at three or more message sizes.
func betaCurve(groups []callGroup, ft Fit) []BetaPoint {
	byBucket := map[int][]float64{}
	for _, g := range groups {
		t := g.SumT / float64(g.N)
		if g.B <= 0 || g.BN > 0 || g.Msg <= 0 {
			continue // only calls within a host say what a message costs there
		}
		b := (t - g.A*ft.AlphaNS - g.AN*ft.alphaNet() - g.C*ft.GammaNSPerB) / g.B
		if b <= 0 {
			continue
		}
		k := int(math.Round(math.Log2(g.Msg)))
		byBucket[k] = append(byBucket[k], b)
	}
	if len(byBucket) < 3 {
		return nil
	}
	var keys []int
	for k := range byBucket {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]BetaPoint, 0, len(keys))
	for _, k := range keys {
		v := byBucket[k]
		slices.Sort(v)
		out = append(out, BetaPoint{MsgBytes: math.Exp2(float64(k)), BetaNSPerB: v[(len(v)-1)/2]})
	}
	return out
}

func (s *Summarizer) fitSums(ranks []*RankSummarizer, src *callSource, bench map[collKey]float64) *fitSums {
	f := &fitSums{}
	con := s.contention()
	world := 0
	for _, rs := range ranks {
		world = max(world, rs.world)
	}
	// Every rank reduces at once: take the contention out of the kernels' time.
	unc := 1 / con.Factor(world)
	for _, rs := range ranks {
		f.link.merge(rs.link)
		f.red.merge(rs.reduce.scaledY(unc))
	}
	type gkey struct {
		name, algo int32
		p          int
		bytes      int64
	}
	idx := map[gkey]int{}
	src.each(func(calls []callRec, inst [][2]int, _ []int64) {
		for _, in := range inst {
			p := in[1] - in[0]
			c0 := calls[in[0]]
			if p < 2 || untimed(calls, in) {
				continue
			}
			a, an, bl, bn, c, ok := terms(s.str(c0.name), s.str(c0.algo), p, float64(c0.bytes), con)
			if !ok {
				continue
			}
			if !slices.Contains(f.ranks, p) {
				f.ranks = append(f.ranks, p)
			}
			k := gkey{c0.name, c0.algo, p, c0.bytes}
			i, seen := idx[k]
			if !seen {
				i = len(f.groups)
				idx[k] = i
				f.groups = append(f.groups, callGroup{A: a, AN: an, B: bl, BN: bn, C: c, Bytes: c0.bytes, Ranks: p,
					Msg: mainMsg(s.str(c0.name), s.str(c0.algo), p, float64(c0.bytes))})
			}
			g := &f.groups[i]
			t := float64(callTime(calls, in))
			if bt := bench[collKey{c0.name, c0.algo, SizeBucket(c0.bytes)}]; bt > 0 {
				// A benchmark's loop: its time per call, as it measured it,
				// includes transfers that began before the last arrival.
				t = bt
			}
			g.SumT += t
			g.N++
		}
	})
	slices.Sort(f.ranks)
	return f
}

// callTime is what the model predicts of a call: from its last member's
// arrival to its last member's completion.
func callTime(calls []callRec, in [2]int) int64 {
	last, end := calls[in[0]].start, calls[in[0]].start
	for _, c := range calls[in[0]:in[1]] {
		last = max(last, c.start)
		end = max(end, c.start+c.dur)
	}
	return end - last
}

// contention is the run's: its hosts and the fewest cores any rank had.
func (s *Summarizer) contention() Contention {
	m := s.meta.Manifest
	if m == nil {
		return Contention{}
	}
	hosts := map[string]int{}
	cores, most := 0, 0
	for _, r := range m.Ranks {
		hosts[r.Host]++
		most = max(most, hosts[r.Host])
		if r.CPUs > 0 && (cores == 0 || r.CPUs < cores) {
			cores = r.CPUs
		}
	}
	return Contention{Hosts: len(hosts), CoresPerHost: cores, RanksPerHost: most}
}

// callSize is one allreduce size and how often a step (or the run, when
// it has no steps) calls it.
type callSize struct {
	Op       string
	Algo     string
	Bytes    int64
	PerStep  float64
	Measured float64 // mean time per call (minus arrival wait), ns
}

// stepCalls lists the world allreduces by size; PerStep counts the
// run's calls until perStep divides it by the steps.
func (s *Summarizer) stepCalls(src *callSource) []callSize {
	type k struct {
		algo  int32
		bytes int64
	}
	m := map[k]*callSize{}
	var sums = map[k]float64{}
	src.each(func(calls []callRec, inst [][2]int, _ []int64) {
		for _, in := range inst {
			c0 := calls[in[0]]
			if s.str(c0.name) != "allreduce" || s.str(c0.comm) != "world" || untimed(calls, in) {
				continue
			}
			key := k{c0.algo, c0.bytes}
			cs := m[key]
			if cs == nil {
				cs = &callSize{Op: "allreduce", Algo: s.str(c0.algo), Bytes: c0.bytes}
				m[key] = cs
			}
			cs.PerStep++
			sums[key] += float64(callTime(calls, in))
		}
	})
	out := []callSize{}
	for key, cs := range m {
		cs.Measured = sums[key] / cs.PerStep
		out = append(out, *cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes < out[j].Bytes })
	return out
}

// perStep turns stepCalls' counts of calls into calls per step, when the
// run has steps.
func perStep(calls []callSize, steps int) []callSize {
	if steps > 0 {
		for i := range calls {
			calls[i].PerStep /= float64(steps)
		}
	}
	return calls
}

// Projection is the run's allreduce time per step projected to more ranks.
type Projection struct {
	Basis    string      `json:"basis"` // "step" or "run"
	Ranks    []int       `json:"ranks"`
	Algos    []string    `json:"algos"`
	TimeNS   [][]float64 `json:"time_ns"` // [algo][ranks]: allreduce time per step
	Current  int         `json:"current_ranks"`
	Measured float64     `json:"measured_ns"` // the run's allreduce time per step (minus arrival wait)
	Modeled  float64     `json:"modeled_ns"`  // the model at the run's rank count and algorithms
	Calls    []CallSize  `json:"calls"`
	// Assumed says which algorithm stood in for calls whose source did not
	// record one (an MPI library's own, seen through PMPI or a Horovod
	// timeline), empty when every call named its own.
	Assumed string `json:"assumed,omitempty"`
}

// CallSize is one allreduce size in the projection.
type CallSize struct {
	Algo       string  `json:"algo"`
	Bytes      int64   `json:"bytes"`
	PerStep    float64 `json:"per_step"`
	MeasuredNS float64 `json:"measured_ns"`
	ModeledNS  float64 `json:"modeled_ns"`
}

// AllreduceAlgos are the algorithms a projection compares by default.
var AllreduceAlgos = []string{"ring", "recursive_doubling", "rabenseifner", "tree"}

// DefaultProjectionRanks are the rank counts a projection shows: the run's
// and powers of eight above it.
func DefaultProjectionRanks(world int) []int {
	out := []int{max(world, 2)}
	for _, r := range []int{8, 64, 512, 4096} {
		if r > out[0] {
			out = append(out, r)
		}
	}
	return out
}

// Project returns the allreduce time per step for each algorithm at each
// rank count, from fit and the run's calls; nil if the run has no world
// allreduce or the fit is not usable. The model at the run's own rank
// count (Modeled) has the run's contention con; the projections assume a
// core per rank.
func Project(fit Fit, calls []callSize, basis string, world int, con Contention, ranks []int, algos []string) *Projection {
	if basis == "step" {
		// Calls made less than once every other step are set-up or
		// tear-down (the first weights' allreduce, a final check), not the
		// training's own communication.
		var steady []callSize
		for _, c := range calls {
			if c.PerStep >= 0.5 {
				steady = append(steady, c)
			}
		}
		calls = steady
	}
	if len(calls) == 0 || !fit.Usable {
		return nil
	}
	if len(algos) == 0 {
		algos = AllreduceAlgos
	}
	pr := &Projection{Basis: basis, Ranks: ranks, Algos: algos, Current: world}
	for _, c := range calls {
		if c.Algo == "" || c.Algo == trace.AlgoUnknown {
			// The MPI library chose, and the source did not say: the op's
			// standard shape stands in, and the projection says so.
			c.Algo = trace.AlgoUnknown
			pr.Assumed = fmt.Sprintf("the run's %s calls do not say which algorithm ran: %s is assumed", c.Op, assumedAlgo[c.Op])
		}
		mod, _ := fit.PredictOn(c.Op, c.Algo, world, float64(c.Bytes), con)
		pr.Measured += c.PerStep * c.Measured
		pr.Modeled += c.PerStep * mod
		pr.Calls = append(pr.Calls, CallSize{Algo: c.Algo, Bytes: c.Bytes, PerStep: c.PerStep, MeasuredNS: c.Measured, ModeledNS: mod})
	}
	pr.TimeNS = make([][]float64, len(algos))
	for i, a := range algos {
		pr.TimeNS[i] = make([]float64, len(ranks))
		for j, p := range ranks {
			for _, c := range calls {
				t, _ := fit.Predict("allreduce", a, p, float64(c.Bytes))
				pr.TimeNS[i][j] += c.PerStep * t
			}
		}
	}
	return pr
}

// Project projects this run's allreduces to the given rank counts with
// its own fit.
func (s *Summary) Project(ranks []int, algos []string) *Projection {
	return Project(s.Fit, s.stepCalls, s.basis(), s.Run.WorldSize, s.Run.Contention, ranks, algos)
}

func (s *Summary) basis() string {
	if len(s.Steps) > 0 {
		return "step"
	}
	return "run"
}

// PooledFit fits alpha, beta and gamma over several runs' messages and
// calls together, for instance 2- and 4-rank runs to predict 8.
func PooledFit(runs ...*Summary) Fit {
	f := &fitSums{}
	for _, s := range runs {
		if s.fitAcc != nil {
			f.merge(s.fitAcc)
		}
	}
	ft := f.solve()
	if len(runs) > 1 {
		ft.Source = "runs"
	}
	return ft
}

// ProjectWith projects this run's allreduces with another fit.
func (s *Summary) ProjectWith(fit Fit, ranks []int, algos []string) *Projection {
	return Project(fit, s.stepCalls, s.basis(), s.Run.WorldSize, s.Run.Contention, ranks, algos)
}

// ModelFile is a calibrated model as `commprof calibrate` writes it and
// predict and report read it (--model).
type ModelFile struct {
	Format  string `json:"format"` // "commprof-model"
	Version int    `json:"version"`
	Fit     Fit    `json:"fit"`
	// What it was calibrated on: the runs, their rank counts, algorithms
	// and sizes, the machine and when.
	Host            string       `json:"host"`
	Contention      []Contention `json:"contention"`
	Runs            []string     `json:"runs"`
	Algos           []string     `json:"algos"`
	MinBytes        int64        `json:"min_bytes"`
	MaxBytes        int64        `json:"max_bytes"`
	Created         string       `json:"created"` // RFC 3339
	CommprofVersion string       `json:"commprof_version"`
}

// ModelFormat names model files.
const ModelFormat = "commprof-model"

// ParseModel reads a model file's bytes; name is for errors.
func ParseModel(name string, b []byte) (*ModelFile, error) {
	var m ModelFile
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading model %s: not a model file: %w", name, err)
	}
	if m.Format != ModelFormat {
		return nil, fmt.Errorf("reading model %s: format %q, want %q (write one with commprof calibrate)", name, m.Format, ModelFormat)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("reading model %s: version %d, this commprof reads version 1", name, m.Version)
	}
	f := m.Fit
	for _, v := range []float64{f.AlphaNS, f.AlphaNetNS, f.BetaNSPerB, f.BetaNetNSPerB, f.GammaNSPerB} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("reading model %s: alpha, beta and gamma must be finite and not negative", name)
		}
	}
	for i, p := range f.BetaCurve {
		if !(p.MsgBytes > 0) || !(p.BetaNSPerB >= 0) || math.IsInf(p.MsgBytes, 0) || math.IsInf(p.BetaNSPerB, 0) ||
			(i > 0 && p.MsgBytes <= f.BetaCurve[i-1].MsgBytes) {
			return nil, fmt.Errorf("reading model %s: beta_curve point %d is not a positive size above the one before it", name, i)
		}
	}
	if !f.Usable {
		return nil, fmt.Errorf("reading model %s: the calibration was not usable: %s", name, f.Reason)
	}
	return &m, nil
}

// UseFit makes f (a calibrated model) the summary's model: its link,
// projection, headline and findings follow from it.
func (s *Summary) UseFit(f Fit) {
	s.Fit = f
	s.Projection = s.Project(DefaultProjectionRanks(s.Run.WorldSize), nil)
	s.Headline = headline(s)
	s.Findings = findings(s)
}

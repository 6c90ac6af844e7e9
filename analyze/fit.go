package analyze

import (
	"math"
	"math/bits"
	"slices"
	"sort"
)

// Fit is the alpha-beta-gamma (Hockney) model of the run's network:
// a message of n bytes takes Alpha + n*Beta; a reduction of n bytes
// takes n*Gamma. docs/metrics.md explains how each is fitted.
type Fit struct {
	// From received messages: transfer time (recv time minus the wait for
	// the first byte) against bytes, by least squares.
	Messages   int64   `json:"messages"`
	MsgAlphaNS float64 `json:"msg_alpha_ns"`     // intercept
	BetaNSPerB float64 `json:"beta_ns_per_byte"` // slope
	LinkGBps   float64 `json:"link_gbps"`        // 1/beta
	MsgR2      float64 `json:"msg_r2"`           // goodness of fit
	// From collective calls (their time minus arrival wait), with Beta
	// fixed: time = a*Alpha + b*n*Beta + c*n*Gamma, a, b, c from each
	// algorithm's formula.
	Calls       int64   `json:"calls"`
	AlphaNS     float64 `json:"alpha_ns"`
	GammaNSPerB float64 `json:"gamma_ns_per_byte"`
	CallR2      float64 `json:"call_r2"`
	RankCounts  []int   `json:"rank_counts"` // communicator sizes the calls had
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

// callTerm is one collective call's model coefficients and time:
// t = A*alpha + B*beta + C*gamma (B and C already multiplied by bytes).
type callTerm struct{ A, B, C, T float64 }

// fitSums holds what the fit needs, in a form that adds across runs.
type fitSums struct {
	link  linReg
	terms []callTerm
	ranks []int
}

func (f *fitSums) merge(o *fitSums) {
	f.link.merge(o.link)
	f.terms = append(f.terms, o.terms...)
	for _, r := range o.ranks {
		if !slices.Contains(f.ranks, r) {
			f.ranks = append(f.ranks, r)
		}
	}
	slices.Sort(f.ranks)
}

// solve fits alpha, beta, gamma: beta (and a message-level alpha) from
// the messages; alpha and gamma from the calls with beta fixed, by
// non-negative least squares on two unknowns.
func (f *fitSums) solve() Fit {
	ft := Fit{Messages: int64(f.link.n), Calls: int64(len(f.terms)), RankCounts: orEmpty(slices.Clone(f.ranks))}
	ft.MsgAlphaNS, ft.BetaNSPerB, ft.MsgR2 = f.link.solve()
	if ft.BetaNSPerB < 0 {
		ft.BetaNSPerB = 0
	}
	if ft.BetaNSPerB > 0 {
		ft.LinkGBps = 1 / ft.BetaNSPerB
	}
	if len(f.terms) == 0 {
		return ft
	}
	beta := ft.BetaNSPerB
	var saa, sac, scc, say, scy, syy, sy float64
	for _, t := range f.terms {
		y := t.T - t.B*beta
		saa += t.A * t.A
		sac += t.A * t.C
		scc += t.C * t.C
		say += t.A * y
		scy += t.C * y
		syy += y * y
		sy += y
	}
	alpha, gamma := 0.0, 0.0
	det := saa*scc - sac*sac
	if det > 1e-12*saa*scc {
		alpha = (say*scc - scy*sac) / det
		gamma = (scy*saa - say*sac) / det
	}
	if det <= 1e-12*saa*scc || alpha < 0 || gamma < 0 {
		// Fall back to the better one-parameter fit.
		a1, g1 := 0.0, 0.0
		if saa > 0 {
			a1 = math.Max(say/saa, 0)
		}
		if scc > 0 {
			g1 = math.Max(scy/scc, 0)
		}
		r1 := syy - 2*a1*say + a1*a1*saa
		r2 := syy - 2*g1*scy + g1*g1*scc
		if r1 <= r2 {
			alpha, gamma = a1, 0
		} else {
			alpha, gamma = 0, g1
		}
	}
	ft.AlphaNS, ft.GammaNSPerB = alpha, gamma
	// R^2 of the whole model against the calls' times.
	n := float64(len(f.terms))
	var mean, ssTot, ssRes float64
	for _, t := range f.terms {
		mean += t.T
	}
	mean /= n
	for _, t := range f.terms {
		p := t.A*alpha + t.B*beta + t.C*gamma
		ssRes += (t.T - p) * (t.T - p)
		ssTot += (t.T - mean) * (t.T - mean)
	}
	if ssTot > 0 {
		ft.CallR2 = 1 - ssRes/ssTot
	}
	return ft
}

// Model returns the alpha, beta and gamma coefficients of op run with
// algo on p ranks over n bytes, per DESIGN.md's formulas; ok is false for
// pairs the model does not cover.
func Model(op, algo string, p int, n float64) (a, b, c float64, ok bool) {
	if p < 2 {
		return 0, 0, 0, op != ""
	}
	lg := float64(bits.Len(uint(p - 1))) // ceil(log2 p)
	fold := 0.0
	if p&(p-1) != 0 {
		fold = 1 // non-powers of two fold the extra ranks in and out
	}
	q := float64(p-1) / float64(p)
	fp := float64(p)
	switch op {
	case "allreduce":
		switch algo {
		case "ring":
			return 2 * (fp - 1), 2 * q * n, q * n, true
		case "recursive_doubling":
			return lg + 2*fold, n * (lg + 2*fold), n * (lg + fold), true
		case "rabenseifner":
			return 2*lg + 2*fold, 2*q*n + 2*fold*n, q*n + fold*n, true
		case "tree":
			return 2 * lg, 2 * lg * n, lg * n, true
		}
	case "reducescatter":
		if algo == "ring" {
			return fp - 1, q * n, q * n, true
		}
	case "allgather":
		if algo == "ring" {
			return fp - 1, q * n, 0, true
		}
	case "broadcast":
		if algo == "tree" {
			return lg, lg * n, 0, true
		}
	case "reduce":
		if algo == "tree" {
			return lg, lg * n, lg * n, true
		}
	}
	return 0, 0, 0, false
}

// Predict returns the model's time in ns for op with algo on p ranks.
func (f Fit) Predict(op, algo string, p int, n float64) (float64, bool) {
	a, b, c, ok := Model(op, algo, p, n)
	return a*f.AlphaNS + b*f.BetaNSPerB + c*f.GammaNSPerB, ok
}

func (s *Summarizer) fitSums(ranks []*RankSummarizer, calls []callRec, inst [][2]int, waits []int64) *fitSums {
	f := &fitSums{terms: make([]callTerm, 0, len(calls))}
	for _, rs := range ranks {
		f.link.merge(rs.link)
	}
	for _, in := range inst {
		p := in[1] - in[0]
		c0 := calls[in[0]]
		if untimed(calls, in) {
			continue
		}
		a, b, c, ok := Model(s.str(c0.name), s.str(c0.algo), p, float64(c0.bytes))
		if !ok || p < 2 {
			continue
		}
		if !slices.Contains(f.ranks, p) {
			f.ranks = append(f.ranks, p)
		}
		for j := in[0]; j < in[1]; j++ {
			f.terms = append(f.terms, callTerm{A: a, B: b, C: c, T: float64(calls[j].dur - waits[j])})
		}
	}
	slices.Sort(f.ranks)
	return f
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

// stepCalls lists the world allreduces by size, per step.
func (s *Summarizer) stepCalls(calls []callRec, inst [][2]int, waits []int64, steps int) []callSize {
	type k struct {
		algo  int32
		bytes int64
	}
	m := map[k]*callSize{}
	var sums = map[k]float64{}
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
		var t float64
		for j := in[0]; j < in[1]; j++ {
			t += float64(calls[j].dur - waits[j])
		}
		sums[key] += t / float64(in[1]-in[0])
	}
	out := []callSize{}
	for key, cs := range m {
		cs.Measured = sums[key] / cs.PerStep
		if steps > 0 {
			cs.PerStep /= float64(steps)
		}
		out = append(out, *cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes < out[j].Bytes })
	return out
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
// allreduce or the fit no data.
func Project(fit Fit, calls []callSize, basis string, world int, ranks []int, algos []string) *Projection {
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
	if len(calls) == 0 || fit.Calls+fit.Messages == 0 {
		return nil
	}
	if len(algos) == 0 {
		algos = AllreduceAlgos
	}
	pr := &Projection{Basis: basis, Ranks: ranks, Algos: algos, Current: world}
	for _, c := range calls {
		mod, _ := fit.Predict(c.Op, c.Algo, world, float64(c.Bytes))
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
	return Project(s.Fit, s.stepCalls, s.basis(), s.Run.WorldSize, ranks, algos)
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
	return f.solve()
}

// ProjectWith projects this run's allreduces with another fit.
func (s *Summary) ProjectWith(fit Fit, ranks []int, algos []string) *Projection {
	return Project(fit, s.stepCalls, s.basis(), s.Run.WorldSize, ranks, algos)
}

package analyze

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/commprof/commprof/trace"
	"gonum.org/v1/gonum/stat/distuv"
)

// A diff's verdicts are given only to changes larger than the two runs'
// own variation allows (docs/metrics.md, "Verdicts above the noise").
// Each run's variation of a figure is measured inside the run: its samples
// (steps, or a collective group's calls) are cut into NoiseBlocks
// contiguous blocks in time order, and the figure is computed over each
// block. The spread of those block values (their relative standard
// deviation) is how much a stretch of the run varies; on a shared machine
// the load comes and goes in stretches longer than a step, so the spread
// of blocks, not the standard error of the whole run's mean, is what a
// second run of the same configuration may differ by. A change is an
// effect when it lies outside the interval the two spreads give at
// Confidence (Student's t, Welch's degrees of freedom) and is larger than
// NoiseFloor; a figure without such samples needs UnsampledFloor.
const (
	Confidence     = 0.95
	NoiseBlocks    = 10
	NoiseFloor     = 0.02
	UnsampledFloor = 0.10
)

// Two runs of one configuration differ by more than either varies inside
// itself: on a 2-core machine, 6 recordings of the same training run
// (docs/metrics.md, "Run to run") had step times from 1.49 to 1.86 ms
// (throughput 43% apart in another pair), and allreduce times from 142
// to 511 µs and arrival wait fractions from 9.8% to 41.3%, in two modes
// that held for a whole run while each run's steps varied little. A
// change of one run against one other gets a verdict only beyond these
// floors: RunFloorStep (a factor of 1.6) for times made of the step
// (step time, throughput, epochs, compute, idle, energy), RunFloorComm (a
// factor of 5) for communication's (exposed, arrival wait, skew, an op's
// or a collective group's time and busbw, the fractions, the straggler
// share, the fit).
const (
	RunFloorStep = 0.6
	RunFloorComm = 4.0
)

// runFloor is the run-to-run floor of a change, 0 for none (bytes,
// calls, memory, accuracy and loss are the same from run to run).
func runFloor(c Change) float64 {
	switch c.Def {
	case "step-time", "throughput", "epoch-time", "time-to-target", "time-per-sample", "compute", "idle", "energy":
		return RunFloorStep
	case "exposed", "wait", "skew", "latency", "busbw", "op-time", "communication", "overlapped", "straggler", "model", "link":
		return RunFloorComm
	}
	if c.ID == "result."+trace.MetricImagesPerSecond {
		return RunFloorStep
	}
	return 0
}

// Verdicts of a diff's changes.
const (
	Better      = "better"
	Worse       = "worse"
	WithinNoise = "within noise"
)

// Spread is one run's own variation of a figure: the relative standard
// deviation of the figure over Blocks contiguous blocks of its samples.
// Blocks is 0 when the run has too few samples (fewer than 3) to say.
type Spread struct {
	RSD    float64 `json:"rsd"`
	Blocks int     `json:"blocks"`
}

// Sampled reports whether the spread was measured.
func (s Spread) Sampled() bool { return s.Blocks >= 3 }

// Blocks cuts n samples into k contiguous blocks (k at most n) of sizes
// that differ by at most one, as index ranges [lo, hi).
func Blocks(n, k int) [][2]int {
	k = min(k, n)
	if k <= 0 {
		return nil
	}
	out := make([][2]int, k)
	for i := range k {
		out[i] = [2]int{i * n / k, (i + 1) * n / k}
	}
	return out
}

// SpreadOf is the spread of block values: their standard deviation over
// the absolute value of their mean. Fewer than 3 values, or a mean of 0,
// give an unmeasured spread.
func SpreadOf(vals []float64) Spread {
	if len(vals) < 3 {
		return Spread{}
	}
	var m float64
	for _, v := range vals {
		m += v
	}
	m /= float64(len(vals))
	if m == 0 || math.IsNaN(m) || math.IsInf(m, 0) {
		return Spread{}
	}
	var ss float64
	for _, v := range vals {
		ss += (v - m) * (v - m)
	}
	return Spread{RSD: math.Sqrt(ss/float64(len(vals)-1)) / math.Abs(m), Blocks: len(vals)}
}

// BlockSpread is the spread of the mean of x (samples in time order) over
// NoiseBlocks contiguous blocks.
func BlockSpread(x []float64) Spread {
	m := newBlockMeans(len(x))
	for _, v := range x {
		m.add(v)
	}
	return m.spread()
}

// blockMeans is BlockSpread of a series handed over value by value, its
// length n known beforehand, so that the series is never held.
type blockMeans struct {
	blocks [][2]int
	i, b   int
	sum    float64
	means  []float64
}

func newBlockMeans(n int) *blockMeans { return &blockMeans{blocks: Blocks(n, NoiseBlocks)} }

func (m *blockMeans) add(x float64) {
	m.sum += x
	m.i++
	if m.b < len(m.blocks) && m.i == m.blocks[m.b][1] {
		m.means = append(m.means, m.sum/float64(m.i-m.blocks[m.b][0]))
		m.sum = 0
		m.b++
	}
}

// spread is BlockSpread's of the n values added.
func (m *blockMeans) spread() Spread { return SpreadOf(m.means) }

// BlockSpreadOf is the spread of a figure computed by f over each of
// NoiseBlocks contiguous blocks of n samples.
func BlockSpreadOf(n int, f func(lo, hi int) float64) Spread {
	var vals []float64
	for _, b := range Blocks(n, NoiseBlocks) {
		vals = append(vals, f(b[0], b[1]))
	}
	return SpreadOf(vals)
}

// BlockRatioSpread is the spread of sum(num)/sum(den) over blocks of
// paired samples.
func BlockRatioSpread(num, den []float64) Spread {
	return BlockSpreadOf(min(len(num), len(den)), func(lo, hi int) float64 {
		d := sumOf(den[lo:hi])
		if d == 0 {
			return 0
		}
		return sumOf(num[lo:hi]) / d
	})
}

// BlockQuantileSpread is the spread of the q-quantile (nearest rank) of x
// over blocks.
func BlockQuantileSpread(x []float64, q float64) Spread {
	return BlockSpreadOf(len(x), func(lo, hi int) float64 {
		b := slices.Clone(x[lo:hi])
		slices.Sort(b)
		k := int(math.Ceil(q*float64(len(b)))) - 1
		return b[min(max(k, 0), len(b)-1)]
	})
}

// LogNoise is the half-width h, at Confidence, of the interval on the
// log ratio ln(b/a) of a figure whose values vary within their runs by sa
// and sb: the relative spreads are the log values' standard deviations
// (delta method) and add in quadrature, with Welch's degrees of freedom.
// The ratio's interval is b/a·e^−h to b/a·e^h. ok is false when either
// run's spread was not measured.
func LogNoise(sa, sb Spread) (h float64, ok bool) { return logNoiseAt(sa, sb, Confidence) }

// logNoiseAt is LogNoise at another confidence level.
func logNoiseAt(sa, sb Spread, level float64) (h float64, ok bool) {
	if !sa.Sampled() || !sb.Sampled() {
		return 0, false
	}
	va, vb := sa.RSD*sa.RSD, sb.RSD*sb.RSD
	df := WelchDF(va, float64(sa.Blocks-1), vb, float64(sb.Blocks-1))
	return tQuantileAt(df, level) * math.Sqrt(va+vb), true
}

// RelInterval is the interval at Confidence on the relative change
// b/a − 1 given the runs' spreads; ok as for LogNoise, and false when a
// or b is not positive.
func RelInterval(a, b float64, sa, sb Spread) (lo, hi float64, ok bool) {
	return relIntervalAt(a, b, sa, sb, Confidence)
}

// relIntervalAt is RelInterval at another confidence level.
func relIntervalAt(a, b float64, sa, sb Spread, level float64) (lo, hi float64, ok bool) {
	h, ok := logNoiseAt(sa, sb, level)
	if !ok || !(a > 0) || !(b > 0) {
		return 0, 0, false
	}
	r := b / a
	return r*math.Exp(-h) - 1, r*math.Exp(h) - 1, true
}

// WelchDF is the Welch–Satterthwaite degrees of freedom of a sum of two
// variances va and vb estimated with dfa and dfb degrees of freedom; the
// smaller of the two when both variances are 0.
func WelchDF(va, dfa, vb, dfb float64) float64 {
	den := va*va/dfa + vb*vb/dfb
	if den == 0 {
		return min(dfa, dfb)
	}
	return (va + vb) * (va + vb) / den
}

// TQuantile is Student's t 0.975 quantile (the half-width factor of a
// two-sided 95% interval) for df degrees of freedom.
func TQuantile(df float64) float64 { return tQuantileAt(df, Confidence) }

// tQuantileAt is the half-width factor of a two-sided interval at
// confidence level for df degrees of freedom; a fractional df takes the
// next smaller whole number (wider), and under 1, 1.
func tQuantileAt(df, level float64) float64 {
	df = max(math.Floor(df), 1)
	if math.IsInf(df, 1) {
		return distuv.UnitNormal.Quantile(1 - (1-level)/2)
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-level)/2)
}

func sumOf(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}

func meanOf(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return sumOf(x) / float64(len(x))
}

// noise is what one figure of a diff is measured against: the two runs'
// spreads where the runs have samples of it, else a floor.
type noise struct {
	from string // what the spreads are over: steps, calls, skew, replay
	a, b Spread
	// needSamples says the figure gets no verdict without spreads: a
	// collective group with fewer than 3 calls in a run (the barrier, the
	// first broadcast) varies by more than any floor, and shows no
	// variation of its own to measure.
	needSamples bool
	// floorAbs, when positive, is the floor in the figure's own unit (an
	// accuracy's LostAccuracy, the replay's noise share), in place of
	// UnsampledFloor.
	floorAbs float64
	// load is what the machine's load may have added to the figure in
	// each run; nil where a run did not read it.
	load *loadTerm
}

// The machine's load (docs/metrics.md, "The machine's load"). A rank
// whose threads wait for a core (another process, more ranks than cores)
// is held up by as long, and so may every rank that waits for it: in each
// run the load adds to a time figure some share k of its ranks' core
// wait, summed over them (s), where k lies between 0 (none of the wait
// fell on the figure) and 1 (all of it did). Taken as the same k in both
// runs, load alike in both cancels, and what is left of the change is
// the difference of the figures less k times the difference d = s_B −
// s_A, counted only where the run that waited longer also waited a
// larger share of its time (a run longer for a reason of its own waits
// longer at the same rate, and is no busier). A change the load may
// explain is one that some k from 0 to 1
// brings back within the runs' own variation: a time that grew by no
// more than d, or fell by no more than −d; a rate over a time whose time
// did; a fraction of two times that moved by no more than |d| over its
// denominator, either way. A time that grew while its run waited less
// is not explained: the load would have made the change larger.
type loadTerm struct {
	s   [2]float64 // the ranks' core wait summed over them, per unit of the figure, in A and B
	num [2]float64 // the time the figure is (or a fraction's numerator), ns, in A and B; 0: none
	den [2]float64 // the time a rate or fraction is over, ns; 0: none
}

// explains reports whether the load may account for a change whose ratio
// B/A lies within [lo, hi] by the runs' own variation.
func (l *loadTerm) explains(lo, hi float64) bool {
	if l == nil || (lo <= 1 && hi >= 1) || !(lo > 0) {
		return false
	}
	d := l.s[1] - l.s[0]
	var t float64 // A's time the change is of
	switch {
	case l.num[0] > 0 && l.den[0] > 0:
		// A fraction: the gap between its two values, at the interval's
		// nearer edge, against what |d| moves it by.
		f, gap := l.num[0]/l.den[0], 0.0
		if lo > 1 {
			gap = f * (lo - 1)
		} else {
			gap = f * (1 - hi)
		}
		return gap <= math.Abs(d)/math.Max(l.den[0], l.den[1])
	case l.den[0] > 0:
		// A rate over a time: the time's ratio is the rate's inverted.
		lo, hi, t = 1/hi, 1/lo, l.den[0]
	case l.num[0] > 0:
		t = l.num[0]
	default:
		return false
	}
	switch {
	case d > 0 && lo > 1:
		return t*(lo-1) <= d
	case d < 0 && hi < 1:
		return t*(1-hi) <= -d
	}
	return false
}

func sampled(from string, a, b Spread) noise { return noise{from: from, a: a, b: b} }

// ofCalls is the noise of a collective group's or an op's figure.
func ofCalls(a, b Spread) noise { return noise{from: "calls", a: a, b: b, needSamples: true} }

// sampled reports whether both runs measured the figure's spread: its
// interval is a test at a confidence level.
func (n noise) measured() bool { return n.a.Sampled() && n.b.Sampled() }

// apply sets a change's interval at the confidence level (two-sided, per
// figure), its noise and where that came from.
func (n noise) apply(c *Change, level float64) {
	if c.Rel == nil {
		return
	}
	c.NoiseRel, c.NoiseFrom = UnsampledFloor, "floor"
	if n.needSamples {
		c.NoiseRel, c.NoiseFrom = 0, "too few calls"
	}
	if n.floorAbs > 0 {
		c.NoiseRel = n.floorAbs / math.Abs(c.A)
		if n.from != "" {
			c.NoiseFrom = n.from
		}
	}
	if lo, hi, ok := relIntervalAt(c.A, c.B, n.a, n.b, level); ok {
		h, _ := logNoiseAt(n.a, n.b, level)
		c.CILow, c.CIHigh = &lo, &hi
		c.NoiseRel, c.NoiseFrom = max(math.Expm1(h), NoiseFloor), n.from
	}
	if n.load != nil && c.NoiseFrom != "too few calls" && c.A > 0 && c.B > 0 {
		// The ratio's bounds by the runs' own variation (withinNoise).
		r := c.B / c.A
		c.LoadExplains = n.load.explains(r/(1+c.NoiseRel), r*(1+c.NoiseRel))
	}
}

// withinNoise reports whether a change is no larger than the runs' own
// variation allows: its interval holds 0, or it is within the floor
// (NoiseRel for a rise; a fall of NoiseRel/(1+NoiseRel), the same factor).
func withinNoise(c Change) bool {
	if c.Rel == nil {
		return false
	}
	if c.LoadExplains {
		return true
	}
	if c.NoiseFrom == "too few calls" {
		return true
	}
	if c.CILow != nil && *c.CILow <= 0 && *c.CIHigh >= 0 {
		return true
	}
	if *c.Rel <= -1 || (c.CILow == nil && c.nz.floorAbs > 0) {
		// A sign change has no factor to compare; a floor in the figure's
		// own unit (an accuracy's half point, the replay's noise share)
		// bounds the difference, not the ratio.
		return math.Abs(*c.Rel) <= c.NoiseRel
	}
	return math.Abs(math.Log1p(*c.Rel)) <= math.Log1p(c.NoiseRel)
}

// stepSpread is the spread of a per-step figure over a run's steps.
func stepSpread(s *Summary, f func(StepStats) float64) Spread {
	x := make([]float64, len(s.Steps))
	for i, st := range s.Steps {
		x[i] = f(st)
	}
	return BlockSpread(x)
}

// stepRatioSpread is the spread of a ratio of per-step figures.
func stepRatioSpread(s *Summary, num, den func(StepStats) float64) Spread {
	n, d := make([]float64, len(s.Steps)), make([]float64, len(s.Steps))
	for i, st := range s.Steps {
		n[i], d[i] = num(st), den(st)
	}
	return BlockRatioSpread(n, d)
}

// stepP95Spread is the spread of the steps' 95th percentile time.
func stepP95Spread(s *Summary) Spread {
	x := make([]float64, len(s.Steps))
	for i, st := range s.Steps {
		x[i] = st.TimeNS
	}
	return BlockQuantileSpread(x, 0.95)
}

// opSpread is the spread of an op's mean time (or, byBytes, its busbw)
// from its collective groups' spreads, weighted by their share of the
// op's time (bytes x busbw): the groups vary independently. Groups
// without a measured spread are left out; none gives an unmeasured one.
func opSpread(s *Summary, op string, byBytes bool) Spread {
	var total, v, dfDen float64
	n := 0
	for _, c := range s.Collectives {
		if c.Op != op {
			continue
		}
		w := float64(c.Time.Sum)
		if byBytes {
			w = float64(c.Bytes) * c.BusBWGBps
		}
		total += w
		if c.TimeSpread.Sampled() {
			vg := w * w * c.TimeSpread.RSD * c.TimeSpread.RSD
			v += vg
			dfDen += vg * vg / float64(c.TimeSpread.Blocks-1)
			n++
		}
	}
	if n == 0 || total <= 0 {
		return Spread{}
	}
	// The degrees of freedom of the sum (Welch–Satterthwaite), as blocks:
	// a group that weighs little does not narrow them.
	blocks := NoiseBlocks
	if dfDen > 0 {
		blocks = min(NoiseBlocks, max(3, int(v*v/dfDen)+1))
	}
	return Spread{RSD: math.Sqrt(v) / total, Blocks: blocks}
}

// skewSeries is the arrival skew of the world calls a run's skew series
// sampled, in call order.
func skewSeries(s *Summary) []float64 {
	out := make([]float64, 0, len(s.Skew.Series.Offset))
	for _, row := range s.Skew.Series.Offset {
		var last int64 = -1
		for _, o := range row {
			last = max(last, o)
		}
		if last >= 0 {
			out = append(out, float64(last))
		}
	}
	return out
}

// replayNoise is the straggler replay's noise floor as a share of the
// run, 0 when the run was not replayed.
func replayNoise(s *Summary) float64 {
	if !s.Stragglers.Replayed || s.Stragglers.TotalNS <= 0 {
		return 0
	}
	return float64(s.Stragglers.NoiseNS) / float64(s.Stragglers.TotalNS)
}

// A straggler is named only above its run's own noise (stragglers.go): the
// bound below is what the costliest of the ranks would be seen to cost
// if none were slow of its own.

// bootDraws bounds the random draws of one noise bound.
const bootDraws = 1 << 24

// noiseBound is what the largest of n sums of w per-window savings, each
// drawn from pool, stays below with probability conf: the most a rank
// with no slowness of its own would be seen to cost over w windows, when
// n ranks are compared. It is a bootstrap (seeded, so that one trace
// always gets one verdict), or the normal approximation of the sums
// where the draws would be too many.
func noiseBound(pool []int64, w, n int, conf float64) int64 {
	if len(pool) == 0 || w <= 0 || n <= 0 {
		return 0
	}
	reps := min(2000, bootDraws/max(w*n, 1))
	if reps < 200 {
		return normalBound(pool, w, n, conf)
	}
	return bootBound(pool, w, n, conf, reps)
}

// normalBound is noiseBound's normal approximation.
func normalBound(pool []int64, w, n int, conf float64) int64 {
	var mean, sq float64
	for _, v := range pool {
		mean += float64(v)
	}
	mean /= float64(len(pool))
	for _, v := range pool {
		d := float64(v) - mean
		sq += d * d
	}
	sd := math.Sqrt(sq / float64(max(len(pool)-1, 1)))
	// P(max of n < x) = Phi(z)^n = conf.
	z := math.Sqrt2 * math.Erfinv(2*math.Pow(conf, 1/float64(n))-1)
	return int64(float64(w)*mean + z*sd*math.Sqrt(float64(w)))
}

// bootBound is noiseBound's bootstrap, of reps replicates.
func bootBound(pool []int64, w, n int, conf float64, reps int) int64 {
	rng := rand.New(rand.NewPCG(uint64(len(pool)), uint64(w)<<8|uint64(n)))
	maxes := make([]int64, reps)
	for k := range maxes {
		best := int64(math.MinInt64)
		for range n {
			var sum int64
			for range w {
				sum += pool[rng.IntN(len(pool))]
			}
			best = max(best, sum)
		}
		maxes[k] = best
	}
	slices.Sort(maxes)
	return maxes[min(int(math.Ceil(conf*float64(reps)))-1, reps-1)]
}

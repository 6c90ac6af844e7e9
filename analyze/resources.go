package analyze

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// The counters ranks sample (trace kind "sample"; docs/metrics.md): the
// names commprof's runtime and the PMPI library write.
const (
	SampleRSS        = "rss_bytes"
	SamplePeakRSS    = "peak_rss_bytes"
	SampleCPUUser    = "cpu_user_ns"
	SampleCPUSystem  = "cpu_system_ns"
	SampleEnergyPkg  = "energy_pkg_uj"
	SampleEnergyDRAM = "energy_dram_uj"
	SampleSchedWait  = "sched_wait_ns"
	// SampleEnergyGPU begins the names of the GPUs' energy readings
	// (NVML): energy_gpu0_uj, energy_gpu1_uj, ...
	SampleEnergyGPU = "energy_gpu"
	// SampleActivation is the bytes of the activation buffers a program
	// says it holds (commprof's trainer: its model's).
	SampleActivation = "activation_bytes"
)

// NoEnergy is what a summary says when no rank recorded energy.
const NoEnergy = "this host exposes no energy counters (no readable RAPL domain under /sys/class/powercap, no GPU energy through NVML): energy is not measured"

// NotSampled is what a summary says of energy when no rank sampled at all.
const NotSampled = "no rank sampled memory, CPU or energy (a run recorded with --sample off, before commprof sampled, or imported)"

// MemoryPoints bounds the points of each rank's memory series.
const MemoryPoints = 400

// Resources is what the ranks' samples say about memory, CPU and energy
// over the run (docs/metrics.md).
type Resources struct {
	// Sampled is whether any rank recorded samples; the rest is 0 when not.
	Sampled bool `json:"sampled"`
	// PeriodNS is the median time between two of a rank's memory readings.
	PeriodNS int64 `json:"period_ns"`
	// PeakRank is the rank of the highest peak resident memory, -1 when none.
	PeakRank     int   `json:"peak_rss_rank"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// MeanPeakRSSBytes is the ranks' peaks averaged.
	MeanPeakRSSBytes int64 `json:"mean_peak_rss_bytes"`
	// Memory is each rank's resident memory over time, at most
	// MemoryPoints points a rank (the largest reading of each interval
	// when there are more).
	Memory []MemorySeries `json:"memory"`
	// ComputeCPUMedian is the median over ranks of RankStats.ComputeCPU;
	// Descheduled lists the ranks whose ComputeCPU is below
	// DescheduledBelow times it: they got markedly less CPU for their
	// compute than the others, so their slowness is the host's (other
	// processes, more ranks than cores), not more work.
	ComputeCPUMedian float64 `json:"compute_cpu_median"`
	// SchedWaitMedian is the median over ranks of
	// RankStats.SchedWaitFraction. A rank whose fraction is at least
	// DescheduledWait and twice the median is descheduled too: it waited
	// for a core markedly more than the others.
	SchedWaitMedian float64 `json:"sched_wait_median"`
	Descheduled     []int   `json:"descheduled"`
	// CoreWaitRanks counts the ranks that read how long their threads
	// waited for a core (two sched_wait_ns readings or more); CoreWaitNS
	// is that wait summed over them, from each rank's first reading to its
	// last. A diff weighs the runs' difference in it against their
	// changes in time (docs/metrics.md, "The machine's load").
	CoreWaitRanks int    `json:"core_wait_ranks"`
	CoreWaitNS    int64  `json:"core_wait_ns"`
	Energy        Energy `json:"energy"`
}

// DescheduledBelow is the share of the ranks' median CPU per compute
// time under which a rank is said to have been descheduled.
const DescheduledBelow = 0.7

// DescheduledWait is the share of its sampled time a rank must have
// waited for a core (and twice the ranks' median) to be said descheduled.
const DescheduledWait = 0.05

// MemorySeries is one rank's resident memory over time.
type MemorySeries struct {
	Rank int `json:"rank"`
	// AtNS are times since the run's first event (RunInfo.FirstNS).
	AtNS     []int64 `json:"at_ns"`
	RSSBytes []int64 `json:"rss_bytes"`
}

// Energy is the energy the hosts' counters measured over the run.
type Energy struct {
	// Measured is whether any host recorded energy; Note says why not.
	Measured bool   `json:"measured"`
	Note     string `json:"note,omitempty"`
	Hosts    int    `json:"hosts"` // hosts (ranks recording energy)
	// PackageJ and DRAMJ are the RAPL package and DRAM domains' energy
	// from the first reading to the last, summed over hosts, J.
	PackageJ float64 `json:"package_j"`
	DRAMJ    float64 `json:"dram_j"`
	// GPUJ is the GPUs' energy (NVML), summed over GPUs and hosts, J;
	// GPUs counts them.
	GPUJ float64 `json:"gpu_j"`
	GPUs int     `json:"gpus"`
	// SpanNS is the time the readings span (the longest host's).
	SpanNS int64 `json:"span_ns"`
	// Watts is (PackageJ + DRAMJ + GPUJ) over SpanNS.
	Watts float64 `json:"watts"`
	// PerStepJ is the mean over steps of StepStats.EnergyJ, 0 without steps.
	PerStepJ float64 `json:"per_step_j"`
	// PerSampleJ is PerStepJ over the global batch (RunInfo.SamplesPerStep).
	PerSampleJ float64 `json:"per_sample_j"`
}

type samplePt struct {
	at int64
	v  float64
}

// resourceAcc is one rank's samples.
type resourceAcc struct {
	rss, cpuUser, cpuSys, pkg, dram, sched []samplePt
	peak, activation                       float64
	gpu                                    map[string][]samplePt // energy_gpuN_uj, by name
}

func (rs *RankSummarizer) sample(name int32, at int64, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return
	}
	a := &rs.res
	switch rs.s.str(name) {
	case SampleRSS:
		a.rss = append(a.rss, samplePt{at, v})
	case SamplePeakRSS:
		a.peak = max(a.peak, v)
	case SampleCPUUser:
		a.cpuUser = append(a.cpuUser, samplePt{at, v})
	case SampleCPUSystem:
		a.cpuSys = append(a.cpuSys, samplePt{at, v})
	case SampleEnergyPkg:
		a.pkg = append(a.pkg, samplePt{at, v})
	case SampleEnergyDRAM:
		a.dram = append(a.dram, samplePt{at, v})
	case SampleActivation:
		a.activation = max(a.activation, v)
	case SampleSchedWait:
		a.sched = append(a.sched, samplePt{at, v})
	default:
		if n := rs.s.str(name); strings.HasPrefix(n, SampleEnergyGPU) && strings.HasSuffix(n, "_uj") {
			if a.gpu == nil {
				a.gpu = map[string][]samplePt{}
			}
			a.gpu[n] = append(a.gpu[n], samplePt{at, v})
		}
	}
}

func sortPts(p []samplePt) {
	slices.SortStableFunc(p, func(a, b samplePt) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
}

// rise is the last reading of a cumulative counter minus the first.
func rise(p []samplePt) float64 {
	if len(p) < 2 {
		return 0
	}
	return max(p[len(p)-1].v-p[0].v, 0)
}

// rises sums a counter's rises between consecutive readings: a sum over
// threads falls when a thread ends, and that is not time given back.
func rises(p []samplePt) float64 {
	var sum float64
	for i := 1; i < len(p); i++ {
		sum += max(p[i].v-p[i-1].v, 0)
	}
	return sum
}

// at interpolates a cumulative counter at t, clamped to its readings.
func at(p []samplePt, t int64) float64 {
	return interpolate(p, sort.Search(len(p), func(i int) bool { return p[i].at >= t }), t)
}

// resources fills the ranks' sample figures in st (indexed like ranks)
// and the steps' energy, and returns the run's.
func (s *Summarizer) resources(ranks []*RankSummarizer, st []RankStats, steps []StepStats, samplesPerStep int) Resources {
	out := Resources{PeakRank: -1, Memory: []MemorySeries{}, Descheduled: []int{}, Energy: Energy{Note: NoEnergy}}
	var gaps []int64
	var first int64
	var spanned bool
	for _, rs := range ranks {
		if rs.spanned && (!spanned || rs.first < first) {
			first, spanned = rs.first, true
		}
	}
	var peaks int64
	var energy [][][]samplePt // per rank that read energy: package, DRAM, then each GPU
	for i, rs := range ranks {
		a := &rs.res
		for _, p := range [][]samplePt{a.rss, a.cpuUser, a.cpuSys, a.pkg, a.dram, a.sched} {
			sortPts(p)
		}
		h := [][]samplePt{a.pkg, a.dram}
		for _, n := range slices.Sorted(maps.Keys(a.gpu)) {
			sortPts(a.gpu[n])
			h = append(h, a.gpu[n])
		}
		for _, p := range h {
			if len(p) > 1 {
				energy = append(energy, h)
				break
			}
		}
		r := &st[i]
		r.ActivationBytes = int64(a.activation)
		if len(a.rss) == 0 {
			continue
		}
		out.Sampled = true
		r.Samples = len(a.rss)
		r.BaseRSSBytes = int64(a.rss[0].v)
		peak := a.peak
		var area float64
		for j, p := range a.rss {
			peak = max(peak, p.v)
			if j > 0 {
				gaps = append(gaps, p.at-a.rss[j-1].at)
				// The reading holds until the next one.
				area += a.rss[j-1].v * float64(p.at-a.rss[j-1].at)
			}
		}
		r.PeakRSSBytes = int64(peak)
		r.SampledNS = a.rss[len(a.rss)-1].at - a.rss[0].at
		if r.SampledNS > 0 {
			r.MeanRSSBytes = int64(area / float64(r.SampledNS))
		} else {
			r.MeanRSSBytes = int64(a.rss[0].v)
		}
		r.CPUUserNS, r.CPUSystemNS = int64(rise(a.cpuUser)), int64(rise(a.cpuSys))
		if r.SampledNS > 0 {
			r.CPUUtil = float64(r.CPUUserNS+r.CPUSystemNS) / float64(r.SampledNS)
		}
		r.SchedWaitNS = int64(rises(a.sched))
		if len(a.sched) > 1 {
			out.CoreWaitRanks++
			out.CoreWaitNS += r.SchedWaitNS
		}
		if r.SampledNS > 0 {
			r.SchedWaitFraction = float64(r.SchedWaitNS) / float64(r.SampledNS)
		}
		if r.ComputeNS > 0 && len(a.cpuUser) > 1 {
			r.ComputeCPU = float64(r.CPUUserNS+r.CPUSystemNS) / float64(r.ComputeNS)
		}
		if r.PeakRSSBytes > out.PeakRSSBytes || out.PeakRank < 0 {
			out.PeakRank, out.PeakRSSBytes = r.Rank, r.PeakRSSBytes
		}
		peaks += r.PeakRSSBytes
		out.Memory = append(out.Memory, memorySeries(r.Rank, a.rss, first))
	}
	if n := len(out.Memory); n > 0 {
		out.MeanPeakRSSBytes = peaks / int64(n)
	}
	out.Descheduled = []int{}
	var waits []float64
	for _, r := range st {
		if r.SampledNS > 0 {
			waits = append(waits, r.SchedWaitFraction)
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		out.SchedWaitMedian = waits[len(waits)/2]
	}
	var cpu []float64
	for _, r := range st {
		if r.ComputeCPU > 0 {
			cpu = append(cpu, r.ComputeCPU)
		}
	}
	if len(cpu) >= 2 {
		slices.Sort(cpu)
		out.ComputeCPUMedian = cpu[len(cpu)/2]
		if len(cpu)%2 == 0 {
			out.ComputeCPUMedian = (cpu[len(cpu)/2-1] + cpu[len(cpu)/2]) / 2
		}
	}
	for _, r := range st {
		lowCPU := out.ComputeCPUMedian > 0 && r.ComputeCPU > 0 && r.ComputeCPU < DescheduledBelow*out.ComputeCPUMedian
		waited := len(waits) >= 2 && r.SchedWaitFraction >= DescheduledWait && r.SchedWaitFraction >= 2*out.SchedWaitMedian
		if lowCPU || waited {
			out.Descheduled = append(out.Descheduled, r.Rank)
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		out.PeriodNS = gaps[len(gaps)/2]
	}
	stepCoreWaits(ranks, steps, out.CoreWaitRanks)
	if len(energy) == 0 {
		if !out.Sampled {
			out.Energy.Note = NotSampled
		}
		return out
	}
	e := &out.Energy
	e.Measured, e.Note, e.Hosts = true, "", len(energy)
	for _, h := range energy {
		e.PackageJ += rise(h[0]) / 1e6
		e.DRAMJ += rise(h[1]) / 1e6
		for _, g := range h[2:] {
			e.GPUJ += rise(g) / 1e6
			e.GPUs++
		}
		for _, p := range h {
			if len(p) > 1 {
				e.SpanNS = max(e.SpanNS, p[len(p)-1].at-p[0].at)
			}
		}
	}
	if e.SpanNS > 0 {
		e.Watts = (e.PackageJ + e.DRAMJ + e.GPUJ) / (float64(e.SpanNS) / 1e9)
	}
	var sum float64
	for i := range steps {
		t0 := steps[i].StartNS
		t1 := t0 + steps[i].MaxNS
		var j float64
		for _, h := range energy {
			for _, p := range h {
				if len(p) > 1 {
					j += (at(p, t1) - at(p, t0)) / 1e6
				}
			}
		}
		steps[i].EnergyJ = j
		sum += j
	}
	if len(steps) > 0 {
		e.PerStepJ = sum / float64(len(steps))
		if samplesPerStep > 0 {
			e.PerSampleJ = e.PerStepJ / float64(samplesPerStep)
		}
	}
	return out
}

// stepCoreWaits sets each step's CoreWaitNS: the ranks' waits for a core
// in the step's window, averaged over the n ranks that read them. Each
// rank's readings are walked once over the windows' bounds in time order.
func stepCoreWaits(ranks []*RankSummarizer, steps []StepStats, n int) {
	if n == 0 || len(steps) == 0 {
		return
	}
	bounds := make([]int64, 0, 2*len(steps))
	for _, st := range steps {
		bounds = append(bounds, st.StartNS, st.StartNS+st.MaxNS)
	}
	order := make([]int, len(bounds))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(bounds[i], bounds[j]) })
	vals := make([]float64, len(bounds))
	sums := make([]float64, len(steps))
	for _, rs := range ranks {
		p := rs.res.sched
		if len(p) < 2 {
			continue
		}
		cum := cumulativeRises(p)
		k := 0
		for _, i := range order {
			t := bounds[i]
			for k < len(cum) && cum[k].at < t {
				k++
			}
			vals[i] = interpolate(cum, k, t)
		}
		for i := range steps {
			sums[i] += max(vals[2*i+1]-vals[2*i], 0)
		}
	}
	for i := range steps {
		steps[i].CoreWaitNS = sums[i] / float64(n)
	}
}

// cumulativeRises is a counter's rises summed from its first reading, at
// each reading: it never falls, where a sum over threads may.
func cumulativeRises(p []samplePt) []samplePt {
	out := make([]samplePt, len(p))
	var sum float64
	for i, q := range p {
		if i > 0 {
			sum += max(q.v-p[i-1].v, 0)
		}
		out[i] = samplePt{q.at, sum}
	}
	return out
}

// interpolate is the cumulative counter p at t, where k is the first
// reading at or after t (len(p) when none): clamped to the readings.
func interpolate(p []samplePt, k int, t int64) float64 {
	switch {
	case k == 0:
		return p[0].v
	case k == len(p):
		return p[len(p)-1].v
	}
	a, b := p[k-1], p[k]
	if b.at == a.at {
		return b.v
	}
	return a.v + (b.v-a.v)*float64(t-a.at)/float64(b.at-a.at)
}

// memorySeries is rss as a series of at most MemoryPoints points, times
// since first: each interval's largest reading, so no peak is lost.
func memorySeries(rank int, rss []samplePt, first int64) MemorySeries {
	m := MemorySeries{Rank: rank}
	per := (len(rss) + MemoryPoints - 1) / MemoryPoints
	for i := 0; i < len(rss); i += per {
		best := rss[i]
		for _, p := range rss[i:min(i+per, len(rss))] {
			if p.v > best.v {
				best = p
			}
		}
		m.AtNS = append(m.AtNS, best.at-first)
		m.RSSBytes = append(m.RSSBytes, int64(best.v))
	}
	return m
}

// addResources adds a diff's memory, CPU and energy figures through add.
// Peak and mean memory have no samples inside a run that say how much
// they vary, so they need UnsampledFloor; energy per step varies as the
// steps' energies do.
func addResources(add func(id, def, section, metric, unit string, va, vb float64, bt better, nz noise), a, b *Summary, perSample bool,
	fromSteps func(func(StepStats) float64) noise) {
	ra, rb := a.Resources, b.Resources
	if ra.Sampled && rb.Sampled {
		add("memory.peak_rss", "rss", "memory", "peak resident memory (highest rank)", "bytes", float64(ra.PeakRSSBytes), float64(rb.PeakRSSBytes), lower, noise{})
		add("memory.mean_peak_rss", "rss", "memory", "peak resident memory (mean over ranks)", "bytes", float64(ra.MeanPeakRSSBytes), float64(rb.MeanPeakRSSBytes), lower, noise{})
		add("memory.mean_rss", "rss", "memory", "mean resident memory (mean over ranks)", "bytes", meanRSS(a), meanRSS(b), lower, noise{})
		add("memory.cpu_use", "cpu", "memory", "CPU use per rank", "cores", cpuUse(a), cpuUse(b), neutral, noise{})
	}
	if ra.Energy.Measured && rb.Energy.Measured {
		add("memory.power", "energy", "memory", "power", "W", ra.Energy.Watts, rb.Energy.Watts, neutral, noise{})
		stepJ := fromSteps(func(s StepStats) float64 { return s.EnergyJ })
		add("memory.energy_per_step", "energy", "memory", "energy per step", "J", ra.Energy.PerStepJ, rb.Energy.PerStepJ, lower, stepJ)
		if perSample {
			add("memory.energy_per_sample", "energy", "memory", "energy per sample", "J", ra.Energy.PerSampleJ, rb.Energy.PerSampleJ, lower, stepJ)
		}
	}
}

func meanRSS(s *Summary) float64 {
	var sum float64
	n := 0
	for _, r := range s.Ranks {
		if r.Samples > 0 {
			sum += float64(r.MeanRSSBytes)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func cpuUse(s *Summary) float64 {
	var sum float64
	n := 0
	for _, r := range s.Ranks {
		if r.SampledNS > 0 {
			sum += r.CPUUtil
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

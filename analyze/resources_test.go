package analyze

import (
	"math"
	"testing"

	"github.com/commprof/commprof/trace"
)

func sampleEv(rank int32, name string, at int64, v float64) trace.Event {
	e := ev(trace.KindSample, rank, name, at, 0)
	e.Comm, e.Value = "", v
	return e
}

// resourceRun is two ranks on two hosts sampled every 100 ms over 2 s
// with steps of 400 ms from 200 ms on: rank 0's resident memory is 100
// MB but 300 MB from 1.0 s to 1.5 s (its kernel high-water mark says 310
// MB), rank 1's a flat 50 MB; each uses a core for half the time in
// user and a tenth in system; host 0 draws 60 W in its package and 6 W
// in DRAM, host 1 40 W and 4 W, counted in µJ from their first reading.
func resourceRun() *trace.Run {
	const ms = int64(1e6)
	var evs []trace.Event
	for r := range int32(2) {
		for t := int64(0); t <= 2000*ms; t += 100 * ms {
			rss := 50e6
			if r == 0 {
				rss = 100e6
				if t >= 1000*ms && t < 1500*ms {
					rss = 300e6
				}
				evs = append(evs, sampleEv(r, SamplePeakRSS, t, 310e6))
			}
			w := []float64{66, 44}[r]
			evs = append(evs, sampleEv(r, SampleRSS, t, rss),
				sampleEv(r, SampleCPUUser, t, float64(t)/2+7e9), sampleEv(r, SampleCPUSystem, t, float64(t)/10),
				sampleEv(r, SampleEnergyPkg, t, w*10/11*float64(t)/1e3), sampleEv(r, SampleEnergyDRAM, t, w/11*float64(t)/1e3))
		}
		for s := range int64(4) {
			st := ev(trace.KindStep, r, "step", 200*ms+s*400*ms, 400*ms)
			st.Step = int32(s)
			evs = append(evs, st, ev(trace.KindCompute, r, "forward", 200*ms+s*400*ms, 300*ms))
		}
	}
	run := runOf(2, evs...)
	run.Ranks[1].Info.Host = "h2"
	run.Manifest.Config["batch_size"] = "10"
	return run
}

func TestResources(t *testing.T) {
	s := Summarize(resourceRun())
	res := s.Resources
	if !res.Sampled || res.PeakRank != 0 || res.PeakRSSBytes != 310e6 || res.PeriodNS != 100e6 {
		t.Errorf("resources: sampled %v, peak rank %d %d, period %d", res.Sampled, res.PeakRank, res.PeakRSSBytes, res.PeriodNS)
	}
	// Rank 0 holds 300 MB for 0.5 s of 2 s and 100 MB the rest: 150 MB.
	r0, r1 := s.Ranks[0], s.Ranks[1]
	if r0.PeakRSSBytes != 310e6 || r0.MeanRSSBytes != 150e6 || r0.BaseRSSBytes != 100e6 || r0.Samples != 21 {
		t.Errorf("rank 0: %+v", r0)
	}
	if r1.PeakRSSBytes != 50e6 || r1.MeanRSSBytes != 50e6 {
		t.Errorf("rank 1: %+v", r1)
	}
	// CPU: 1 s user and 0.2 s system over 2 s; compute spans 4 × 300 ms.
	if r0.CPUUserNS != 1e9 || r0.CPUSystemNS != 200e6 || r0.SampledNS != 2e9 || math.Abs(r0.CPUUtil-0.6) > 1e-9 ||
		math.Abs(r0.ComputeCPU-1.0) > 1e-9 {
		t.Errorf("rank 0 CPU: %+v", r0)
	}
	// Samples do not stretch the run: it spans its steps, 200 ms to 1.8 s.
	if s.Run.SpanNS != 1600e6 {
		t.Errorf("span %d, want the steps' 1.6 s", s.Run.SpanNS)
	}
	if len(res.Memory) != 2 || len(res.Memory[0].AtNS) != 21 || res.Memory[0].AtNS[0] != -200e6 || res.Memory[0].RSSBytes[10] != 300e6 {
		t.Errorf("memory series %+v", res.Memory)
	}
	// 110 W over 2 s; each 400 ms step 44 J; a global batch of 20.
	e := res.Energy
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if !e.Measured || e.Hosts != 2 || !near(e.PackageJ, 200) || !near(e.DRAMJ, 20) || !near(e.Watts, 110) ||
		!near(e.PerStepJ, 44) || !near(e.PerSampleJ, 2.2) || e.Note != "" {
		t.Errorf("energy %+v", e)
	}
	for _, st := range s.Steps {
		if !near(st.EnergyJ, 44) {
			t.Errorf("step %d: %g J, want 44", st.Step, st.EnergyJ)
		}
	}
}

// TestNoResources: a run without samples says it has none, and that no
// energy was measured, without inventing figures.
func TestNoResources(t *testing.T) {
	s := Summarize(lateRun())
	if s.Resources.Sampled || s.Resources.PeakRank != -1 || s.Resources.Energy.Measured || s.Resources.Energy.Note != NotSampled ||
		s.Ranks[0].PeakRSSBytes != 0 || len(s.Resources.Memory) != 0 {
		t.Errorf("%+v", s.Resources)
	}
}

// TestMemorySeriesKeepsPeaks: a long run's series is cut to MemoryPoints
// points that keep a one-reading peak.
func TestMemorySeriesKeepsPeaks(t *testing.T) {
	var pts []samplePt
	for i := range int64(10_000) {
		v := 1e6
		if i == 7777 {
			v = 9e9
		}
		pts = append(pts, samplePt{i, v})
	}
	m := memorySeries(3, pts, 0)
	top := int64(0)
	for _, v := range m.RSSBytes {
		top = max(top, v)
	}
	if len(m.AtNS) > MemoryPoints || len(m.AtNS) != len(m.RSSBytes) || top != 9e9 {
		t.Errorf("%d points, top %d", len(m.AtNS), top)
	}
}

// TestDescheduled: of three ranks computing alike, the one that got a
// third of the others' CPU for it is named descheduled; the others not.
func TestDescheduled(t *testing.T) {
	const ms = int64(1e6)
	var evs []trace.Event
	for r := range int32(3) {
		rate := []float64{0.5, 0.55, 0.17}[r]
		for at := int64(0); at <= 2000*ms; at += 100 * ms {
			evs = append(evs, sampleEv(r, SampleRSS, at, 1e6), sampleEv(r, SampleCPUUser, at, rate*float64(at)), sampleEv(r, SampleCPUSystem, at, 0))
		}
		for s := range int64(4) {
			evs = append(evs, ev(trace.KindCompute, r, "forward", 200*ms+s*400*ms, 300*ms))
		}
	}
	res := Summarize(runOf(3, evs...)).Resources
	if len(res.Descheduled) != 1 || res.Descheduled[0] != 2 || math.Abs(res.ComputeCPUMedian-0.5/0.6) > 1e-9 {
		t.Errorf("descheduled %v, median CPU per compute %g", res.Descheduled, res.ComputeCPUMedian)
	}
}

// TestDiffResources: a run whose peak memory doubled is worse in it, by
// more than the 10% floor; one that moved 5% is within noise; energy per
// step is compared when both runs measured it.
func TestDiffResources(t *testing.T) {
	scaled := func(peak float64) *Summary {
		run := resourceRun()
		for i := range run.Ranks {
			for j, e := range run.Ranks[i].Events {
				if e.Kind == trace.KindSample && (e.Name == SampleRSS || e.Name == SamplePeakRSS) {
					run.Ranks[i].Events[j].Value *= peak
				}
			}
		}
		return Summarize(run)
	}
	base := scaled(1)
	find := func(d *Diff, metric string) Change {
		for _, c := range d.Changes {
			if c.Metric == metric {
				return c
			}
		}
		t.Fatalf("no %q in the diff", metric)
		return Change{}
	}
	if c := find(Compare(base, scaled(2)), "peak resident memory (highest rank)"); c.Verdict != Worse || c.B != 2*c.A {
		t.Errorf("doubled: %+v", c)
	}
	if c := find(Compare(base, scaled(1.05)), "peak resident memory (highest rank)"); c.Verdict != WithinNoise {
		t.Errorf("5%% more: %+v", c)
	}
	if c := find(Compare(base, scaled(1)), "energy per step"); c.A != 44 || c.B != 44 {
		t.Errorf("energy per step: %+v", c)
	}
}

// TestDescheduledByWaiting: of three ranks without compute spans (an MPI
// program), the one whose threads waited for a core 30% of the time,
// against 1% for the others, is named descheduled; a thread's end (the
// counter falling) is not counted as time given back.
func TestDescheduledByWaiting(t *testing.T) {
	const ms = int64(1e6)
	var evs []trace.Event
	for r := range int32(3) {
		share := []float64{0.01, 0.012, 0.3}[r]
		for at := int64(0); at <= 2000*ms; at += 100 * ms {
			w := share * float64(at)
			if r == 0 && at >= 1000*ms {
				w -= 5e6 // a thread ended
			}
			evs = append(evs, sampleEv(r, SampleRSS, at, 1e6), sampleEv(r, SampleSchedWait, at, w))
		}
		evs = append(evs, coll(r, "barrier", "direct", 0, 0, 1000, 0))
	}
	s := Summarize(runOf(3, evs...))
	if d := s.Resources.Descheduled; len(d) != 1 || d[0] != 2 {
		t.Errorf("descheduled %v, median wait %g", d, s.Resources.SchedWaitMedian)
	}
	if r := s.Ranks[2]; r.SchedWaitNS != 600e6 || math.Abs(r.SchedWaitFraction-0.3) > 1e-9 {
		t.Errorf("rank 2: waited %d ns, %g", r.SchedWaitNS, r.SchedWaitFraction)
	}
	if r := s.Ranks[0]; r.SchedWaitNS != 19e6 { // 20 ms but the interval the thread ended in
		t.Errorf("rank 0: waited %d ns, want 19 ms", r.SchedWaitNS)
	}
}

// TestGPUEnergy: a host's two GPUs drawing 100 W and 200 W for 2 s
// (NVML's readings, without RAPL) are 600 J measured, 300 W.
func TestGPUEnergy(t *testing.T) {
	const ms = int64(1e6)
	var evs []trace.Event
	for at := int64(0); at <= 2000*ms; at += 100 * ms {
		evs = append(evs, sampleEv(0, SampleRSS, at, 1e6), sampleEv(0, "energy_gpu0_uj", at, 100*float64(at)/1e3),
			sampleEv(0, "energy_gpu1_uj", at, 200*float64(at)/1e3))
	}
	e := Summarize(runOf(1, evs...)).Resources.Energy
	if !e.Measured || e.GPUs != 2 || math.Abs(e.GPUJ-600) > 1e-6 || math.Abs(e.Watts-300) > 1e-6 || e.PackageJ != 0 {
		t.Errorf("%+v", e)
	}
}

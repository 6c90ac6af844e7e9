package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// TestTrainerMemory records the trainer's MLP (784-256-128-10) on 2
// ranks at batch 64 and batch 4096. The model's activation buffers are
// batch × 2 × (256+128+10) float32s, so the activation bytes each rank
// reports are 3152 per image, exactly; and each step also copies its
// batch's images (batch × 784 float32s), so resident memory must grow by
// at least (3152 + 3136) × 4032 bytes from one run to the other (less 5%
// for pages the kernel may not have mapped yet). Go's collector frees
// the previous step's copy only when the heap has grown by GOGC percent
// of what is live: with GOGC=10 the growth is at most the buffers, two
// steps' images and a tenth of the peak, the tolerance docs/metrics.md
// states.
func TestTrainerMemory(t *testing.T) {
	hidden := []int{256, 128}
	perImage := int64(0)
	for _, w := range append(hidden, 10) {
		perImage += 2 * 4 * int64(w) // pre-activation and activation, float32
	}
	const input = 784 * 4
	grown := map[int]map[int]int64{} // batch -> rank -> peak - base
	peak := map[int]int64{}          // rank -> peak at the larger batch
	for _, batch := range []int{64, 4096} {
		dir := filepath.Join(t.TempDir(), "run")
		r := commprof(t, []string{"GOGC=10"}, "record", "--ranks", "2", "--out", dir, "--", "train", "--epochs", "1",
			"--synthetic-size", "16384", "--batch-size", strconv.Itoa(batch))
		if r.code != 0 {
			t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		s := statsJSON(t, dir)
		if !s.Resources.Sampled || s.Resources.PeakRank < 0 || len(s.Resources.Memory) != 2 {
			t.Fatalf("batch %d: resources %+v", batch, s.Resources)
		}
		grown[batch] = map[int]int64{}
		for _, rk := range s.Ranks {
			t.Logf("batch %d rank %d: activations %d, rss base %d peak %d mean %d, %d samples, cpu %.2f cores",
				batch, rk.Rank, rk.ActivationBytes, rk.BaseRSSBytes, rk.PeakRSSBytes, rk.MeanRSSBytes, rk.Samples, rk.CPUUtil)
			if want := perImage * int64(batch); rk.ActivationBytes != want {
				t.Errorf("batch %d rank %d: activation bytes %d, want %d", batch, rk.Rank, rk.ActivationBytes, want)
			}
			if rk.PeakRSSBytes < rk.MeanRSSBytes || rk.MeanRSSBytes < rk.BaseRSSBytes/2 || rk.CPUUserNS <= 0 {
				t.Errorf("batch %d rank %d: %+v", batch, rk.Rank, rk)
			}
			grown[batch][rk.Rank] = rk.PeakRSSBytes - rk.BaseRSSBytes
			peak[rk.Rank] = rk.PeakRSSBytes
		}
		checkSamplesBound(t, dir)
	}
	const more = 4096 - 64
	lo := 0.95 * float64((perImage+input)*more)
	for r := range 2 {
		hi := float64((perImage+2*input)*more) + 0.1*float64(peak[r])
		d := float64(grown[4096][r] - grown[64][r])
		t.Logf("rank %d: peak grew %.1f MiB more at batch 4096; %.1f to %.1f MiB computed", r, d/(1<<20), lo/(1<<20), hi/(1<<20))
		if d < lo || d > hi {
			t.Errorf("rank %d: peak grew %.0f bytes more at batch 4096 than at 64, not within %.0f to %.0f", r, d, lo, hi)
		}
	}
}

// checkSamplesBound: each rank's memory readings begin before its first
// event of the program and end after its last, so that a run's first
// and last readings bound it, and the summary's peak is at least every
// reading (recomputed here from the raw events).
func checkSamplesBound(t *testing.T, dir string) {
	t.Helper()
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := statsJSON(t, dir)
	for i, rk := range run.Ranks {
		var first, last, lo, hi int64 = -1, -1, -1, -1
		var peak float64
		for _, e := range rk.Events {
			if e.Kind == trace.KindSample {
				if e.Name == analyze.SampleRSS {
					if first < 0 {
						first = e.Start
					}
					last = max(last, e.Start)
				}
				if e.Name == analyze.SampleRSS || e.Name == analyze.SamplePeakRSS {
					peak = max(peak, e.Value)
				}
				continue
			}
			if lo < 0 || e.Start < lo {
				lo = e.Start
			}
			hi = max(hi, e.End())
		}
		if first < 0 || first > lo || last < hi {
			t.Errorf("rank %d: memory read from %d to %d, events from %d to %d", rk.Info.Rank, first, last, lo, hi)
		}
		if got := s.Ranks[i].PeakRSSBytes; got != int64(peak) {
			t.Errorf("rank %d: peak %d, the readings' largest %.0f", rk.Info.Rank, got, peak)
		}
	}
}

// TestTrainerEnergyOnePerHost records the trainer on 3 ranks of one host
// with the energy counters read from a powercap directory the test makes:
// rank 0, the host's first, reads them; the others do not; the summary
// says energy was measured on one host. Without the directory, it says
// the host exposes none.
func TestTrainerEnergyOnePerHost(t *testing.T) {
	root := t.TempDir()
	for zone, name := range map[string]string{"intel-rapl:0": "package-0", "intel-rapl:0:0": "dram"} {
		if err := os.MkdirAll(filepath.Join(root, zone), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"name": name, "energy_uj": "123456", "max_energy_range_uj": "262143328850"} {
			if err := os.WriteFile(filepath.Join(root, zone, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		powercap string
		measured bool
	}{{root, true}, {filepath.Join(root, "none"), false}} {
		dir := filepath.Join(t.TempDir(), "run")
		r := commprof(t, []string{envnames.Powercap + "=" + c.powercap}, "record", "--ranks", "3", "--out", dir, "--", "train", "--epochs", "1",
			"--synthetic-size", "600", "--hidden", "16")
		if r.code != 0 {
			t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		run, err := trace.ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, rk := range run.Ranks {
			n := 0
			for _, e := range rk.Events {
				if e.Kind == trace.KindSample && (e.Name == analyze.SampleEnergyPkg || e.Name == analyze.SampleEnergyDRAM) {
					n++
				}
			}
			if want := c.measured && rk.Info.Rank == 0; (n >= 4) != want || (!want && n > 0) {
				t.Errorf("%s: rank %d recorded %d energy readings", c.powercap, rk.Info.Rank, n)
			}
		}
		e := statsJSON(t, dir).Resources.Energy
		if e.Measured != c.measured || (c.measured && e.Hosts != 1) || (!c.measured && e.Note != analyze.NoEnergy) {
			t.Errorf("%s: energy %+v", c.powercap, e)
		}
	}
}

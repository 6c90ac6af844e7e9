package pmpi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// memorySummary is what the memory tests read of `commprof stats
// --format json` (docs/stats-json.md).
type memorySummary struct {
	Ranks []struct {
		Rank         int     `json:"rank"`
		Samples      int     `json:"samples"`
		PeakRSSBytes int64   `json:"peak_rss_bytes"`
		MeanRSSBytes int64   `json:"mean_rss_bytes"`
		BaseRSSBytes int64   `json:"base_rss_bytes"`
		CPUUserNS    int64   `json:"cpu_user_ns"`
		CPUSystemNS  int64   `json:"cpu_system_ns"`
		SampledNS    int64   `json:"sampled_ns"`
		CPUUtil      float64 `json:"cpu_util"`
	} `json:"ranks"`
	Resources struct {
		Sampled  bool  `json:"sampled"`
		PeriodNS int64 `json:"period_ns"`
		PeakRank int   `json:"peak_rss_rank"`
		Energy   struct {
			Measured bool   `json:"measured"`
			Note     string `json:"note"`
		} `json:"energy"`
	} `json:"resources"`
}

// TestSampledMemory records testdata/memhold.c, whose rank 1 maps and
// writes 192 MiB and holds it for 1.5 s while ranks 0 and 2 wait in a
// barrier: the peak resident memory stats gives rank 1, less its memory
// when recording began, is the 192 MiB within 3%, the other ranks' peaks
// are within a few MiB of their start, rank 1 is named the highest peak,
// and the samples came at the default 10 Hz with a reading at the start
// and end.
func TestSampledMemory(t *testing.T) {
	const mib, holdMS = 192, 1500
	for _, f := range []Flavor{OpenMPI, MPICH} {
		t.Run(string(f), func(t *testing.T) {
			m := findMPI(t, f)
			prog := cProgram(t, m, "memhold")
			library(t, m)
			bin := commprofBin(t)
			dir := filepath.Join(t.TempDir(), "run")
			args := append(append([]string{"record", "--out", dir, "--", m.run}, m.args...), "-np", "3", prog, "1",
				strconv.Itoa(mib), strconv.Itoa(holdMS))
			res := command(t, nil, "", bin, args...)
			if res.err != nil {
				t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
			}
			held := regexp.MustCompile(`held (\d+)`).FindStringSubmatch(res.stdout)
			if held == nil {
				t.Fatalf("the program did not say what it held:\n%s", res.stdout)
			}
			want, _ := strconv.ParseInt(held[1], 10, 64)

			out := command(t, nil, "", bin, "stats", "--format", "json", dir)
			if out.err != nil {
				t.Fatalf("stats: %v\n%s", out.err, out.stderr)
			}
			var s memorySummary
			if err := json.Unmarshal([]byte(out.stdout), &s); err != nil {
				t.Fatalf("stats JSON: %v", err)
			}
			if !s.Resources.Sampled || len(s.Ranks) != 3 {
				t.Fatalf("no samples: %+v", s)
			}
			for _, r := range s.Ranks {
				grew := r.PeakRSSBytes - r.BaseRSSBytes
				t.Logf("rank %d: %d samples, base %d, peak %d (+%d), mean %d; cpu user %d system %d ns over %d ns",
					r.Rank, r.Samples, r.BaseRSSBytes, r.PeakRSSBytes, grew, r.MeanRSSBytes, r.CPUUserNS, r.CPUSystemNS, r.SampledNS)
				if r.Rank == 1 {
					if d := float64(grew-want) / float64(want); d < -0.03 || d > 0.03 {
						t.Errorf("rank 1's peak grew %d bytes over its start; it held %d (%+.1f%%)", grew, want, 100*d)
					}
					// Held for 1.5 s of a run of a few: the mean sits between.
					if r.MeanRSSBytes <= r.BaseRSSBytes+want/20 || r.MeanRSSBytes >= r.PeakRSSBytes {
						t.Errorf("rank 1's mean %d is not between its start %d and its peak %d", r.MeanRSSBytes, r.BaseRSSBytes, r.PeakRSSBytes)
					}
				} else if grew > want/20 {
					t.Errorf("rank %d, which held nothing, grew %d bytes", r.Rank, grew)
				}
				// At 10 Hz over at least the hold, and more than the set-up's time.
				if r.Samples < holdMS/100 || r.SampledNS < holdMS*1e6 {
					t.Errorf("rank %d: %d samples over %d ns", r.Rank, r.Samples, r.SampledNS)
				}
				if r.CPUUserNS+r.CPUSystemNS <= 0 || r.CPUUtil > 16 {
					t.Errorf("rank %d: CPU %d + %d ns over %d ns", r.Rank, r.CPUUserNS, r.CPUSystemNS, r.SampledNS)
				}
			}
			if s.Resources.PeakRank != 1 {
				t.Errorf("the highest peak is rank %d's, not rank 1's", s.Resources.PeakRank)
			}
			if p := s.Resources.PeriodNS; p < 80e6 || p > 300e6 {
				t.Errorf("samples every %d ns, not near the default 100 ms", p)
			}
			if !s.Resources.Energy.Measured && s.Resources.Energy.Note == "" {
				t.Error("no energy and no word why")
			}

			// The raw events: each counter is read at the start (before
			// the program's first call after MPI_Init) and at the end
			// (after its last), and the CPU counters never go back.
			run := readRun(t, dir)
			for _, rk := range run.Ranks {
				var first, last, firstCall, lastCall int64 = -1, -1, -1, -1
				cpu := map[string]float64{}
				for _, e := range rk.Events {
					switch {
					case e.Kind == trace.KindSample && e.Name == "rss_bytes":
						if first < 0 {
							first = e.Start
						}
						last = e.Start
					case e.Kind == trace.KindSample && (e.Name == "cpu_user_ns" || e.Name == "cpu_system_ns"):
						if e.Value < cpu[e.Name] {
							t.Errorf("rank %d: %s went from %g back to %g", rk.Info.Rank, e.Name, cpu[e.Name], e.Value)
						}
						cpu[e.Name] = e.Value
					case e.Kind == trace.KindCollective:
						if firstCall < 0 {
							firstCall = e.Start
						}
						lastCall = e.End()
					}
				}
				if first < 0 || first > firstCall || last < lastCall {
					t.Errorf("rank %d: memory read from %d to %d ns, calls from %d to %d", rk.Info.Rank, first, last, firstCall, lastCall)
				}
			}
		})
	}
}

// TestSamplingOff: COMMPROF_SAMPLE=off records no samples; a bad value
// is refused with a warning and the default used.
func TestSamplingOff(t *testing.T) {
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "memhold")
	for _, c := range []struct {
		value   string
		samples bool
		warn    string
	}{{"off", false, ""}, {"20hz", true, ""}, {"fast", true, envnames.Sample + "=fast"}} {
		dir, res := recordDirect(t, m, 2, []string{envnames.Sample + "=" + c.value}, prog, "1", "1", "300")
		if res.err != nil {
			t.Fatalf("%s: %v\n%s", c.value, res.err, res.stderr)
		}
		if c.warn != "" && !regexp.MustCompile(regexp.QuoteMeta(c.warn)).MatchString(res.stderr) {
			t.Errorf(envnames.Sample+"=%s: no warning naming it:\n%s", c.value, res.stderr)
		}
		n := 0
		for _, rk := range readRun(t, dir).Ranks {
			for _, e := range rk.Events {
				if e.Kind == trace.KindSample {
					n++
				}
			}
		}
		if (n > 0) != c.samples {
			t.Errorf(envnames.Sample+"=%s: %d samples", c.value, n)
		}
	}
}

// TestSampledEnergy runs testdata/memhold.c on 3 ranks with the energy
// counters read from a powercap directory the test makes and advances
// while the program runs (one package with a DRAM domain; the package's
// counter wraps around once): the first rank of the host, and only it,
// records the energy, and its last reading is what the counters advanced,
// the wrap-around included.
func TestSampledEnergy(t *testing.T) {
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "memhold")
	const rng = 1_000_000
	root := t.TempDir()
	set := func(zone string, v int64) {
		tmp := filepath.Join(root, zone, "energy_uj.tmp")
		if err := os.WriteFile(tmp, []byte(strconv.FormatInt(v, 10)+"\n"), 0o644); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, filepath.Join(root, zone, "energy_uj")); err != nil {
			t.Error(err)
		}
	}
	for zone, name := range map[string]string{"intel-rapl:0": "package-0", "intel-rapl:0:0": "dram", "intel-rapl:0:1": "core"} {
		if err := os.MkdirAll(filepath.Join(root, zone), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"name": name, "max_energy_range_uj": strconv.Itoa(rng)} {
			if err := os.WriteFile(filepath.Join(root, zone, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	set("intel-rapl:0", rng-300_000)
	set("intel-rapl:0:0", 1000)
	set("intel-rapl:0:1", 5)
	dir := filepath.Join(t.TempDir(), "run")
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Once rank 0 has opened its stream (its sampler starts right
		// after), advance the counters every 150 ms: the package by
		// 200,000 µJ a time (wrapping on the second), the DRAM by 30,000.
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, trace.RankFile(0))); err == nil {
				break
			}
			if time.Since(start) > 60*time.Second {
				t.Error("rank 0 never opened its stream")
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
		pkg, dram := int64(rng-300_000), int64(1000)
		for range 4 {
			pkg, dram = (pkg+200_000)%rng, dram+30_000
			set("intel-rapl:0", pkg)
			set("intel-rapl:0:0", dram)
			time.Sleep(150 * time.Millisecond)
		}
	}()
	// As recordDirect, with the run directory known beforehand (MPICH's
	// launcher passes the whole environment on).
	res := launch(t, m, 3, []string{envnames.Powercap + "=" + root, "LD_PRELOAD=" + library(t, m), envnames.TraceDir + "=" + dir}, "", prog, "1", "1", "3000")
	<-done
	if res.err != nil {
		t.Fatalf("%v\n%s", res.err, res.stderr)
	}
	for _, rk := range readRun(t, dir).Ranks {
		last := map[string]float64{}
		n := 0
		for _, e := range rk.Events {
			if e.Kind == trace.KindSample && strings.HasPrefix(e.Name, "energy_") {
				last[e.Name] = e.Value
				n++
			}
		}
		switch rk.Info.Rank {
		case 0:
			if last["energy_pkg_uj"] != 800_000 || last["energy_dram_uj"] != 120_000 || n < 20 {
				t.Errorf("rank 0: %d energy readings, the last %v; want package 800000 µJ and DRAM 120000 µJ", n, last)
			}
		default:
			if n != 0 {
				t.Errorf("rank %d, not the host's first, recorded %d energy readings", rk.Info.Rank, n)
			}
		}
	}
}

// TestSampledGPUEnergy runs testdata/memhold.c on 2 ranks with a stand-in
// for NVIDIA's NVML library (testdata/fakenvml.c: two GPUs whose counters
// advance by 100 and 200 mJ at each reading): the host's first rank
// records each GPU's energy since its first reading, reading by reading,
// in µJ; the other rank none.
func TestSampledGPUEnergy(t *testing.T) {
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "memhold")
	libdir := t.TempDir()
	if err := run(".", "cc", "-O2", "-Wall", "-fPIC", "-shared", "-o", filepath.Join(libdir, "libnvidia-ml.so.1"), filepath.Join("testdata", "fakenvml.c")); err != nil {
		t.Fatal(err)
	}
	dir, res := recordDirect(t, m, 2, []string{"LD_LIBRARY_PATH=" + libdir, envnames.Powercap + "=" + t.TempDir()}, prog, "1", "1", "600")
	if res.err != nil {
		t.Fatalf("%v\n%s", res.err, res.stderr)
	}
	for _, rk := range readRun(t, dir).Ranks {
		got := map[string][]float64{}
		for _, e := range rk.Events {
			if e.Kind == trace.KindSample && strings.HasPrefix(e.Name, "energy_") {
				got[e.Name] = append(got[e.Name], e.Value)
			}
		}
		if rk.Info.Rank != 0 {
			if len(got) != 0 {
				t.Errorf("rank %d, not the host's first, recorded %v", rk.Info.Rank, got)
			}
			continue
		}
		if len(got) != 2 || len(got["energy_gpu0_uj"]) < 3 || len(got["energy_gpu1_uj"]) != len(got["energy_gpu0_uj"]) {
			t.Fatalf("rank 0 recorded %v; want readings of energy_gpu0_uj and energy_gpu1_uj alone", got)
		}
		for g, per := range map[string]float64{"energy_gpu0_uj": 100_000, "energy_gpu1_uj": 200_000} {
			for k, v := range got[g] {
				if v != float64(k+1)*per {
					t.Errorf("%s reading %d: %g µJ, want %g", g, k, v, float64(k+1)*per)
				}
			}
		}
	}
}

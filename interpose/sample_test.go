package interpose

import (
	"testing"
	"time"

	"github.com/commprof/commprof/trace"
)

// TestSampler: a sampler reads every counter at its start, at least once
// a period while it runs, and at its stop; resident memory is positive and
// CPU time never falls; Stop twice is harmless.
func TestSampler(t *testing.T) {
	w, err := trace.NewWriter(discard{}, trace.RankInfo{WorldSize: 1}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is flushed while the test looks at the recorder's buffer.
	rec := NewRecorder(w, 0, Monotonic(), RecorderOptions{FlushEvery: time.Hour})
	s := StartSampler(rec, 10*time.Millisecond, nil)
	names := []string{SampleRSS, SamplePeakRSS, SampleCPUUser, SampleCPUSys, SampleGoHeap, SampleSched}
	readings := func() map[string]int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := map[string]int{}
		for _, e := range rec.cur {
			if e.Kind == trace.KindSample {
				n[e.Name]++
			}
		}
		return n
	}
	// Burn CPU, so that the CPU counters move, until every counter has
	// been read at least 8 times: about 80 ms on an idle machine. On a
	// loaded one the sampler's ticks may come late or be dropped, so the
	// test waits for readings, not for time (at most a minute).
	enough := func() bool {
		n := readings()
		for _, name := range names {
			if n[name] < 8 {
				return false
			}
		}
		return true
	}
	x := 0
	for deadline := time.Now().Add(time.Minute); !enough() && time.Now().Before(deadline); {
		for end := time.Now().Add(5 * time.Millisecond); time.Now().Before(end); {
			x++
		}
	}
	s.Stop()
	s.Stop()
	rec.mu.Lock()
	evs := append([]trace.Event(nil), rec.cur...)
	rec.mu.Unlock()
	n := map[string]int{}
	last := map[string]float64{}
	for _, e := range evs {
		if e.Kind != trace.KindSample {
			continue
		}
		n[e.Name]++
		if e.Value < last[e.Name] && e.Name != SampleRSS && e.Name != SampleGoHeap && e.Name != SampleSched {
			t.Errorf("%s fell from %g to %g", e.Name, last[e.Name], e.Value)
		}
		last[e.Name] = e.Value
	}
	for _, name := range names {
		if n[name] < 8 {
			t.Errorf("%s: %d readings (%v)", name, n[name], n)
		}
	}
	if last[SampleRSS] <= 0 || last[SamplePeakRSS] < last[SampleRSS]/2 || last[SampleCPUUser] <= 0 {
		t.Errorf("last readings %v", last)
	}
	_ = x
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestSampleEvery parses what --sample and COMMPROF_SAMPLE take.
func TestSampleEvery(t *testing.T) {
	for in, want := range map[string]time.Duration{"": DefaultSampleEvery, "off": 0, "0": 0, "OFF": 0, "100ms": 100 * time.Millisecond,
		"10hz": 100 * time.Millisecond, "4Hz": 250 * time.Millisecond, "2s": 2 * time.Second, "1ms": time.Millisecond} {
		if got, err := SampleEvery(in); err != nil || got != want {
			t.Errorf("SampleEvery(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "0.5ms", "-1s", "0hz", "5000hz", "hz", "10 hz"} {
		if got, err := SampleEvery(in); err == nil {
			t.Errorf("SampleEvery(%q) = %v, want an error", in, got)
		}
	}
}

// BenchmarkSample is the cost of one sample on the rank: a pread of
// /proc/self/statm, a getrusage, every thread's schedstat, a read of the
// Go heap's size and six events recorded.
func BenchmarkSample(b *testing.B) {
	rec := discardRecorder(b)
	s := StartSampler(rec, time.Hour, nil)
	b.ResetTimer()
	for range b.N {
		s.Sample()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/sample")
	b.ReportMetric(100*float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(DefaultSampleEvery), "%core@10Hz")
	s.Stop()
	_ = rec.Close()
}

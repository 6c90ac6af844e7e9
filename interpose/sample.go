package interpose

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/commprof/commprof/trace"
)

// The counters a rank samples, as the names of its sample events
// (docs/metrics.md defines each). The PMPI library's C side writes the
// same names (interpose/pmpi/c/sample.c).
const (
	SampleRSS      = "rss_bytes"      // resident memory now (/proc/self/statm)
	SamplePeakRSS  = "peak_rss_bytes" // the most resident memory so far (getrusage's maxrss, /proc/self/status VmHWM)
	SampleCPUUser  = "cpu_user_ns"    // user CPU time of the process so far
	SampleCPUSys   = "cpu_system_ns"  // system CPU time of the process so far
	SampleGoHeap   = "go_heap_bytes"  // the Go heap's objects, live and not yet swept (commprof's own ranks)
	SampleSched    = "sched_wait_ns"  // time the process's threads were runnable but not running (/proc/self/task/*/schedstat)
	SampleEnergyPk = "energy_pkg_uj"  // RAPL package energy since the sampler started, µJ, summed over the host's packages
	SampleEnergyDR = "energy_dram_uj" // RAPL DRAM energy since the sampler started, µJ
)

// DefaultSampleEvery is the sampling period when none is asked for: 10 Hz.
const DefaultSampleEvery = 100 * time.Millisecond

// Sampler records a rank's resident memory, CPU time and (on one rank per
// host) the host's energy counters as sample events: once when it starts,
// every period, and once when it stops, so that a run's first and last
// readings bound it.
type Sampler struct {
	rec    *Recorder
	energy *RAPL
	statm  *os.File
	page   int64
	heap   []metrics.Sample
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	ev     trace.Event
	tasks  map[string]*os.File // each thread's schedstat, by thread id
}

// StartSampler starts sampling into rec every period (> 0). energy, if
// not nil, is read with the rest; the Sampler does not close it.
func StartSampler(rec *Recorder, every time.Duration, energy *RAPL) *Sampler {
	s := &Sampler{rec: rec, energy: energy, page: int64(os.Getpagesize()),
		heap: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}},
		stop: make(chan struct{}), done: make(chan struct{})}
	if f, err := os.Open("/proc/self/statm"); err == nil {
		s.statm = f
	}
	s.Sample()
	go s.loop(every)
	return s
}

func (s *Sampler) loop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.Sample()
		case <-s.stop:
			return
		}
	}
}

// Stop takes the last sample and stops the sampler; call it before the
// recorder closes. It may be called more than once.
func (s *Sampler) Stop() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.Sample()
		if s.statm != nil {
			s.statm.Close()
		}
		for _, f := range s.tasks {
			f.Close()
		}
	})
}

// Sample records one reading of every counter now. The sampler's own
// goroutine calls it; so do StartSampler and Stop, never at the same
// time.
func (s *Sampler) Sample() {
	now := s.rec.Now()
	if rss, ok := s.rss(); ok {
		s.record(SampleRSS, now, float64(rss))
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.record(SamplePeakRSS, now, float64(ru.Maxrss)*1024)
		s.record(SampleCPUUser, now, float64(ru.Utime.Nano()))
		s.record(SampleCPUSys, now, float64(ru.Stime.Nano()))
	}
	if w, ok := s.schedWait(); ok {
		s.record(SampleSched, now, float64(w))
	}
	metrics.Read(s.heap)
	if s.heap[0].Value.Kind() == metrics.KindUint64 {
		s.record(SampleGoHeap, now, float64(s.heap[0].Value.Uint64()))
	}
	if s.energy != nil {
		for _, d := range s.energy.Read() {
			s.record(d.Name, now, float64(d.MicroJoules))
		}
	}
}

func (s *Sampler) record(name string, at int64, v float64) {
	s.ev = trace.Event{Kind: trace.KindSample, Name: name, Start: at, Peer: -1, Seq: -1, Step: s.rec.Step(), Root: -1, Chunk: -1, Value: v}
	s.rec.Record(&s.ev)
}

// rss reads the resident set from /proc/self/statm (its second field,
// in pages), with one pread on a file kept open.
func (s *Sampler) rss() (int64, bool) {
	if s.statm == nil {
		return 0, false
	}
	var buf [128]byte
	n, err := s.statm.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	f := strings.Fields(string(buf[:n]))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * s.page, true
}

// SampleEvery parses a sampling period as `record --sample` and
// COMMPROF_SAMPLE give it: a duration (100ms), a rate (10hz), or off
// (returned as 0).
func SampleEvery(v string) (time.Duration, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	switch v {
	case "":
		return DefaultSampleEvery, nil
	case "off", "0":
		return 0, nil
	}
	if hz, ok := strings.CutSuffix(v, "hz"); ok {
		f, err := strconv.ParseFloat(hz, 64)
		if err != nil || f <= 0 || f > 1000 {
			return 0, fmt.Errorf("sampling rate %q: want a rate from 0 to 1000hz, a period such as 100ms, or off", v)
		}
		return time.Duration(float64(time.Second) / f), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("sampling period %q: want a period of 1ms or more such as 100ms, a rate such as 10hz, or off", v)
	}
	return d, nil
}

// schedWait sums the run-queue wait (the second field of schedstat: ns
// runnable but not running) of the process's threads, keeping each
// thread's file open between readings. A thread that ended takes its
// wait with it, so the sum may fall; analyses use its rises.
func (s *Sampler) schedWait() (int64, bool) {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return 0, false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, false
	}
	if s.tasks == nil {
		s.tasks = map[string]*os.File{}
	}
	live := make(map[string]bool, len(names))
	var sum int64
	var buf [96]byte
	ok := false
	for _, n := range names {
		live[n] = true
		f := s.tasks[n]
		if f == nil {
			if f, err = os.Open("/proc/self/task/" + n + "/schedstat"); err != nil {
				continue
			}
			s.tasks[n] = f
		}
		k, _ := f.ReadAt(buf[:], 0)
		fs := strings.Fields(string(buf[:k]))
		if len(fs) < 2 {
			continue
		}
		if w, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
			sum += w
			ok = true
		}
	}
	for n, f := range s.tasks {
		if !live[n] {
			f.Close()
			delete(s.tasks, n)
		}
	}
	return sum, ok
}

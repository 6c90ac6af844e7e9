// Package synthrun writes synthetic runs of any rank count, for tests and
// measurements of what reads runs at scale (reports of 512 to 4,096
// ranks): training steps of compute and recursive-doubling allreduces,
// ranks grouped on hosts, and chosen ranks held back by a known delay
// before each allreduce, so that a test knows which ranks must stand out.
// The manifest says the run is synthetic (source format "synthetic"), and
// so does every page drawn from it.
package synthrun

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/commprof/commprof/trace"
)

// Format is the source format of a synthetic run's manifest.
const Format = "synthetic"

// Options describe the run to write.
type Options struct {
	Ranks        int           // world size; required
	RanksPerHost int           // ranks on each host (default 8)
	Steps        int           // training steps (default 10)
	Calls        int           // allreduces per step (default 2)
	Bytes        int64         // bytes of each allreduce (default 4 MiB)
	Late         map[int]int64 // rank -> ns it arrives late at every allreduce
	Seed         uint64        // of the compute times' jitter
}

// Host returns the host name of rank r.
func (o Options) Host(r int) string { return fmt.Sprintf("node%04d", r/o.RanksPerHost) }

func (o *Options) defaults() error {
	if o.Ranks < 1 || o.Ranks > trace.MaxWorldSize {
		return fmt.Errorf("synthrun: %d ranks; a run has 1 to %d", o.Ranks, trace.MaxWorldSize)
	}
	if o.RanksPerHost <= 0 {
		o.RanksPerHost = 8
	}
	if o.Steps <= 0 {
		o.Steps = 10
	}
	if o.Calls <= 0 {
		o.Calls = 2
	}
	if o.Bytes <= 0 {
		o.Bytes = 4 << 20
	}
	for r := range o.Late {
		if r < 0 || r >= o.Ranks {
			return fmt.Errorf("synthrun: late rank %d is not a rank of %d", r, o.Ranks)
		}
	}
	return nil
}

// Timing of the synthetic program, in ns.
const (
	forwardNS  = 2_000_000
	backwardNS = 3_000_000
	roundNS    = 150_000 // one recursive-doubling round's exchange
	jitter     = 0.05    // compute times vary by up to 5%
)

// Write writes the run into dir, which must not exist or be empty.
func Write(dir string, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		return errors.Join(err, fmt.Errorf("synthrun: %s is not empty", dir))
	}
	starts := arrivals(o)
	errs := make([]error, o.Ranks)
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				errs[r] = writeRank(dir, o, r, starts)
			}
		}()
	}
	for r := range o.Ranks {
		next <- r
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return trace.WriteManifest(dir, manifest(o))
}

// arrivals returns, per call (step*Calls+c) and rank, the start of the
// rank's allreduce: each rank's compute with its jitter, plus its delay.
// The steps follow one another: a step starts when the last call of the
// one before completed.
func arrivals(o Options) [][]int64 {
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	calls := o.Steps * o.Calls
	out := make([][]int64, calls)
	var t int64
	for s := range o.Steps {
		for c := range o.Calls {
			k := s*o.Calls + c
			out[k] = make([]int64, o.Ranks)
			var last int64
			for r := range o.Ranks {
				work := int64(backwardNS / o.Calls)
				if c == 0 {
					work += forwardNS
				}
				work = int64(float64(work) * (1 + jitter*(2*rng.Float64()-1)))
				out[k][r] = t + work + o.Late[r]
				last = max(last, out[k][r])
			}
			t = last + callNS(o)
		}
	}
	return out
}

// rounds is the number of recursive-doubling rounds on n ranks.
func rounds(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

func callNS(o Options) int64 { return int64(max(rounds(o.Ranks), 1)) * roundNS }

func writeRank(dir string, o Options, r int, starts [][]int64) (err error) {
	f, err := os.Create(filepath.Join(dir, trace.RankFile(r)))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w, err := trace.NewWriter(f, trace.RankInfo{Rank: r, WorldSize: o.Ranks, Host: o.Host(r), PID: 1000 + r, RunID: runID(o)}, trace.WriterOptions{})
	if err != nil {
		return err
	}
	ev := func(kind trace.Kind, name string, start, dur int64, step int32) trace.Event {
		return trace.Event{Rank: int32(r), Kind: kind, Name: name, Start: start, Dur: dur, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1, Comm: "world"}
	}
	var prev int64 // when the rank's last call ended
	for s := range o.Steps {
		var evs []trace.Event
		stepStart := prev
		for c := range o.Calls {
			k := s*o.Calls + c
			arrive := starts[k][r]
			name := "backward"
			if c == 0 {
				fw := int64(float64(arrive-prev-o.Late[r]) * forwardNS / (forwardNS + backwardNS/float64(o.Calls)))
				evs = append(evs, ev(trace.KindCompute, "forward", prev, fw, int32(s)))
				prev += fw
			}
			evs = append(evs, ev(trace.KindCompute, name, prev, arrive-prev-o.Late[r], int32(s)))
			var last int64
			for _, a := range starts[k] {
				last = max(last, a)
			}
			end := last + callNS(o)
			call := ev(trace.KindCollective, "allreduce", arrive, end-arrive, int32(s))
			call.Seq, call.Bytes, call.Algo, call.DType = int64(k), o.Bytes, "recursive_doubling", "float32"
			evs = append(evs, call)
			for j := range rounds(o.Ranks) {
				peer := r ^ (1 << j)
				if peer >= o.Ranks {
					continue
				}
				at := last + int64(j)*roundNS
				for _, kind := range []trace.Kind{trace.KindSend, trace.KindRecv} {
					m := ev(kind, "allreduce", at, roundNS, int32(s))
					m.Peer, m.Seq, m.Chunk, m.Bytes, m.Algo, m.DType = int32(peer), int64(k), int32(j), o.Bytes, "recursive_doubling", "float32"
					evs = append(evs, m)
				}
			}
			prev = end
		}
		evs = append(evs, ev(trace.KindStep, "step", stepStart, prev-stepStart, int32(s)))
		if err := w.Write(evs); err != nil {
			return err
		}
	}
	return w.Close()
}

func runID(o Options) string { return "synthetic-" + strconv.Itoa(o.Ranks) }

func manifest(o Options) *trace.Manifest {
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, CommprofVersion: "synthetic", RunID: runID(o),
		Name: fmt.Sprintf("synthetic %d ranks", o.Ranks), WorldSize: o.Ranks, Launcher: Format,
		Command: []string{"synthrun", "--ranks", strconv.Itoa(o.Ranks)},
		Config: map[string]string{"program": Format, "ranks": strconv.Itoa(o.Ranks), "ranks_per_host": strconv.Itoa(o.RanksPerHost),
			"steps": strconv.Itoa(o.Steps)},
		Codec: trace.Zstd, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Status: trace.StatusComplete,
		Clock: trace.Clock{Method: "same-host"},
		Source: &trace.Source{Format: Format, Tool: "commprof internal/synthrun", CollectiveMessages: true,
			Missing: []string{"real measurements: every time in this run was generated"}},
	}
	for r := range o.Ranks {
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, Host: o.Host(r), PID: 1000 + r, File: trace.RankFile(r)})
	}
	return m
}

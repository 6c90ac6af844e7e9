package export

import (
	"fmt"
	"github.com/commprof/commprof/analyze"
	"io"
	"strconv"

	"github.com/google/pprof/profile"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// Sample types of the pprof profile, in the order of each sample's values.
const (
	SampleTime     = "time"     // nanoseconds spent in sends or receives
	SampleBytes    = "bytes"    // payload bytes
	SampleMessages = "messages" // count
	SampleWait     = "wait"     // nanoseconds receives spent waiting for their sender
)

// PProf writes a pprof profile (gzipped protobuf, as profile.Write writes
// it) of where the run's communication time and bytes go, for `go tool
// pprof` and other pprof viewers. Its samples are the run's sends and
// receives; each has the values time (ns), bytes, messages (count) and
// wait (ns of a receive spent waiting for its sender; 0 for sends), time
// being the default. Messages with the same stack are one sample. The
// stack, from the root to the leaf, is
//
//	rank N → op (allreduce, ...) → algorithm → "send to peer P" or
//	"recv from peer P" → size bucket ("64KiB-128KiB": at least 64 KiB,
//	less than 128 KiB)
//
// and each sample is labelled kind=send or kind=recv. Every message is
// counted on both its sides, once as a send and once as a receive: focus
// on one kind (-tagfocus kind=send) to count it once. Collective events
// are left out, as the time of their messages is inside theirs and would
// be counted twice; the Perfetto export shows them.
func PProf(w io.Writer, run *trace.Run) error {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: SampleTime, Unit: "nanoseconds"},
			{Type: SampleBytes, Unit: "bytes"},
			{Type: SampleMessages, Unit: "count"},
			{Type: SampleWait, Unit: "nanoseconds"},
		},
		DefaultSampleType: SampleTime,
		Comments: []string{
			"commprof: communication of run " + run.Dir,
			"stack: rank > op > algorithm > peer > message size",
			"every message counts twice, as a send and as a receive: -tagfocus kind=send counts it once",
		},
	}
	if m := run.Manifest; m != nil {
		p.Comments[0] = fmt.Sprintf("commprof: communication of run %s (%s, %d ranks)", m.RunID, m.Name, m.WorldSize)
		if !m.Start.IsZero() {
			p.TimeNanos = m.Start.UnixNano()
		}
	}
	b := pprofBuilder{p: p, locs: map[string]*profile.Location{},
		mapping: &profile.Mapping{ID: 1, File: "commprof", HasFunctions: true}}
	p.Mapping = []*profile.Mapping{b.mapping}

	type key struct {
		rank   int
		kind   trace.Kind
		peer   int32
		bucket int // analyze.SizeBucket: 0 for empty messages
		name   string
		algo   string
	}
	samples := map[key]*profile.Sample{}
	var first, last int64
	seen := false
	for i := range run.Ranks {
		rk := &run.Ranks[i]
		for j := range rk.Events {
			e := &rk.Events[j]
			if !seen || e.Start < first {
				first = e.Start
			}
			if !seen || e.End() > last {
				last = e.End()
			}
			seen = true
			if e.Kind != trace.KindSend && e.Kind != trace.KindRecv {
				continue
			}
			k := key{rank: rk.Info.Rank, kind: e.Kind, peer: e.Peer, bucket: analyze.SizeBucket(e.Bytes), name: e.Name, algo: e.Algo}
			s := samples[k]
			if s == nil {
				s = &profile.Sample{
					Location: b.stack(k.rank, k.kind, k.peer, k.bucket, k.name, k.algo),
					Value:    make([]int64, len(p.SampleType)),
					Label:    map[string][]string{"kind": {k.kind.String()}},
				}
				samples[k] = s
				p.Sample = append(p.Sample, s)
			}
			s.Value[0] += e.Dur
			s.Value[1] += e.Bytes
			s.Value[2]++
			s.Value[3] += e.Wait
		}
	}
	p.DurationNanos = last - first
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("building the pprof profile: %w", err)
	}
	return p.Write(w)
}

// pprofBuilder makes one function and one location per frame name.
type pprofBuilder struct {
	p       *profile.Profile
	mapping *profile.Mapping
	locs    map[string]*profile.Location
}

// stack returns a sample's locations, leaf first as pprof has them.
func (b *pprofBuilder) stack(rank int, kind trace.Kind, peer int32, bucket int, name, algo string) []*profile.Location {
	dir := "send to peer "
	if kind == trace.KindRecv {
		dir = "recv from peer "
	}
	if name == "" {
		name = "(no op)"
	}
	if algo == "" {
		algo = "(no algorithm)"
	}
	return []*profile.Location{
		b.loc(units.Bucket(bucket)),
		b.loc(dir + strconv.Itoa(int(peer))),
		b.loc(algo),
		b.loc(name),
		b.loc("rank " + strconv.Itoa(rank)),
	}
}

func (b *pprofBuilder) loc(frame string) *profile.Location {
	if l, ok := b.locs[frame]; ok {
		return l
	}
	id := uint64(len(b.p.Function) + 1)
	f := &profile.Function{ID: id, Name: frame, SystemName: frame}
	l := &profile.Location{ID: id, Mapping: b.mapping, Line: []profile.Line{{Function: f}}}
	b.p.Function = append(b.p.Function, f)
	b.p.Location = append(b.p.Location, l)
	b.locs[frame] = l
	return l
}

package torch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/commprof/commprof/trace"
)

// spoolBytes builds a spool as the Python recorder writes one.
func spoolBytes(meta RankMeta, groups []Group, strs []string, evs []trace.Event, end bool) []byte {
	var b bytes.Buffer
	b.WriteString(spoolMagic)
	rec := func(typ byte, p []byte) {
		b.WriteByte(typ)
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(p)))
		b.Write(p)
	}
	mj, _ := json.Marshal(meta)
	rec(recMeta, mj)
	for _, g := range groups {
		gj, _ := json.Marshal(g)
		rec(recMeta, gj)
	}
	ids := map[string]uint16{}
	for i, s := range strs {
		p := binary.LittleEndian.AppendUint16(nil, uint16(i))
		rec(recString, append(p, s...))
		ids[s] = uint16(i)
	}
	for _, e := range evs {
		p := []byte{byte(e.Kind)}
		for _, s := range []string{e.Name, e.Comm, e.DType, e.Label} {
			p = binary.LittleEndian.AppendUint16(p, ids[s])
		}
		for _, v := range []int64{e.Start, e.Dur, e.Bytes, e.Seq} {
			p = binary.LittleEndian.AppendUint64(p, uint64(v))
		}
		for _, v := range []int32{e.Peer, e.Root, e.Step} {
			p = binary.LittleEndian.AppendUint32(p, uint32(v))
		}
		p = binary.LittleEndian.AppendUint64(p, math.Float64bits(e.Value))
		rec(recEvent, p)
	}
	if end {
		rec(recEnd, nil)
	}
	return b.Bytes()
}

func TestReadSpool(t *testing.T) {
	meta := RankMeta{Rank: 1, WorldSize: 2, Backend: "gloo", Host: "h", PID: 7, MonoNS: 100, WallNS: 1000}
	evs := []trace.Event{
		{Rank: 1, Kind: trace.KindCollective, Name: "allreduce", Comm: "world", DType: "float32", Start: 200, Dur: 50, Bytes: 4000, Seq: 0, Peer: -1, Root: -1, Step: -1, Chunk: -1},
		{Rank: 1, Kind: trace.KindSend, Name: "send", Comm: "world", DType: "float16", Label: "batch_isend_irecv", Start: 300, Dur: 5, Bytes: 18, Seq: 7, Peer: 0, Root: -1, Step: 3, Chunk: -1, Value: 2},
	}
	full := spoolBytes(meta, nil, []string{"", "allreduce", "world", "float32", "send", "float16", "batch_isend_irecv"}, evs, true)
	s, err := ReadSpool(bytes.NewReader(full))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Ended || s.Cut != nil || s.Meta.Rank != 1 || s.Meta.PID != 7 || len(s.Events) != 2 {
		t.Fatalf("read %+v", s)
	}
	for i := range evs {
		if s.Events[i] != evs[i] {
			t.Errorf("event %d: %+v, want %+v", i, s.Events[i], evs[i])
		}
	}
	// Cut anywhere: every whole event before the cut, and the cut said.
	for n := len(full) - 1; n > len(spoolMagic); n-- {
		s, err := ReadSpool(bytes.NewReader(full[:n]))
		if err != nil {
			continue // cut inside the metadata: not yet a spool
		}
		if s.Cut == nil || s.Ended {
			t.Fatalf("cut at %d: Cut %v, Ended %v", n, s.Cut, s.Ended)
		}
		for i, e := range s.Events {
			if e != evs[i] {
				t.Fatalf("cut at %d: event %d is %+v", n, i, e)
			}
		}
	}
	if _, err := ReadSpool(bytes.NewReader([]byte("not a spool at all"))); !errors.Is(err, ErrNotSpool) {
		t.Errorf("foreign file: %v", err)
	}
	bad := spoolBytes(RankMeta{Rank: 3, WorldSize: 2}, nil, nil, nil, true)
	if _, err := ReadSpool(bytes.NewReader(bad)); err == nil {
		t.Errorf("rank 3 of 2 was accepted")
	}
}

func FuzzReadSpool(f *testing.F) {
	meta := RankMeta{Rank: 0, WorldSize: 2, Host: "h"}
	f.Add(spoolBytes(meta, nil, []string{"", "allreduce", "world"}, []trace.Event{{Kind: trace.KindCollective, Name: "allreduce", Comm: "world", Dur: 1}}, true))
	f.Add([]byte(spoolMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadSpool(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, e := range s.Events {
			if e.Dur < 0 || e.Bytes < 0 || e.Kind < trace.KindCollective || e.Kind > trace.KindReduce {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}

// TestFinishWritesStreams: spools become streams whose events are the
// spools', on one time line from the earliest rank, and the manifest
// names the groups and the backend; a rank without its end record fails
// the run, keeping what it recorded.
func TestFinishWritesStreams(t *testing.T) {
	dir := t.TempDir()
	strs := []string{"", "allreduce", "world", "float32"}
	for r := 0; r < 2; r++ {
		meta := RankMeta{Rank: r, WorldSize: 2, Backend: "gloo", Host: "h", Torch: "1.13", MonoNS: int64(1000 + r*10), WallNS: 5000 + int64(r*10)}
		ev := trace.Event{Kind: trace.KindCollective, Name: "allreduce", Comm: "world", DType: "float32", Start: 2000, Dur: 100, Bytes: 64, Seq: 0, Peer: -1, Root: -1, Step: -1}
		b := spoolBytes(meta, []Group{{Name: "world", Ranks: []int{0, 1}, Backend: "gloo"}}, strs, []trace.Event{ev}, r == 0)
		if err := os.WriteFile(dir+"/"+SpoolFile(r), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Finish(dir, FinishOptions{Name: "t", RunID: "t-1", Codec: trace.Zstd, Args: []string{"python3", "x.py", "--batch-size", "32"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != trace.StatusFailed || m.Config["comm world"] != "0,1" || m.Config["backend"] != "gloo" || m.Config["batch_size"] != "32" || m.Source.Format != "pytorch" {
		t.Errorf("manifest: status %s (%s), config %v", m.Status, m.Error, m.Config)
	}
	if len(Spools(dir)) != 0 {
		t.Errorf("spools left: %v", Spools(dir))
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range run.Ranks {
		if len(rk.Events) != 1 || rk.Events[0].Bytes != 64 || rk.Events[0].Start != 1000 {
			t.Errorf("rank %d: %+v (want the allreduce 1000ns after the first rank opened its spool)", rk.Info.Rank, rk.Events)
		}
	}
}

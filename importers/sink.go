package importers

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/commprof/commprof/trace"
)

// batchEvents is how many events a stream batch holds.
const batchEvents = 16384

// bufferedBytes bounds the encoded events all streams hold in memory
// before they are spilled to the sink's one spill file, so that memory
// follows the events kept, not the rank count.
const bufferedBytes = 16 << 20

// maxStrings bounds the sink's table of the strings events carry (names,
// communicators, labels); strings past it are spilled inline.
const maxStrings = 1 << 16

// sink writes an import's events into a run directory, one stream per
// rank. A parser does not always know a stream's final rank, the world
// size or the run's epoch before its input ends (a Horovod timeline names
// its ranks as they appear; a Kineto file may say its rank after its
// events), so events are first kept compactly encoded, per stream, and
// spilled to one file when they take too much memory; finish then writes
// each rank's stream, one at a time, with the facts known at the end.
// Memory and open files are thus bounded by the events held unwritten
// and one trace writer, whatever the number of ranks.
type sink struct {
	dir     string
	codec   trace.Codec
	runID   string
	streams map[int]*spool
	events  int64

	// buffered is the bytes the spools hold encoded in memory.
	buffered int
	spill    *os.File
	spillW   *bufio.Writer
	spillOff int64
	passes   []int64 // where each spill pass begins in the file
	// strs and strID are the table of strings events carry.
	strs  []string
	strID map[string]uint32
}

// spool is one stream being written.
type spool struct {
	id   int
	s    *sink
	info trace.RankInfo
	buf  []byte    // events encoded, not yet spilled
	nbuf int       // events in buf
	segs []segment // the stream's events in the spill file, in order
	n    int64     // events added
}

// segment is a run of one stream's events in the spill file.
type segment struct {
	off  int64
	size uint32
	n    uint32
}

func newSink(dir string, codec trace.Codec, runID string) *sink {
	return &sink{dir: dir, codec: codec, runID: runID, streams: map[int]*spool{}, strID: map[string]uint32{}}
}

// stream returns stream id's spool, creating it with info (its rank and
// world as known now).
func (s *sink) stream(id int, info trace.RankInfo) (*spool, error) {
	if sp := s.streams[id]; sp != nil {
		return sp, nil
	}
	info.RunID = s.runID
	if info.WorldSize <= info.Rank {
		info.WorldSize = info.Rank + 1
	}
	sp := &spool{id: id, s: s, info: info}
	s.streams[id] = sp
	return sp, nil
}

// add keeps e for the stream, spilling every stream's events when they
// hold too much memory.
func (sp *spool) add(e trace.Event) error {
	before := len(sp.buf)
	sp.buf = sp.s.encode(sp.buf, &e)
	sp.nbuf++
	sp.n++
	sp.s.buffered += len(sp.buf) - before
	if sp.s.buffered >= bufferedBytes || len(sp.buf) >= math.MaxUint32/2 {
		return sp.s.spillAll()
	}
	return nil
}

// spillAll writes every stream's events to the spill file, in stream
// order, so that finish reads each stream's in order of the file.
func (s *sink) spillAll() error {
	if s.spill == nil {
		f, err := os.CreateTemp(s.dir, ".spill-*")
		if err != nil {
			return fmt.Errorf("creating the import's spill file: %w", err)
		}
		s.spill, s.spillW = f, bufio.NewWriterSize(f, 1<<20)
	}
	ids := make([]int, 0, len(s.streams))
	for id, sp := range s.streams {
		if sp.nbuf > 0 {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	s.passes = append(s.passes, s.spillOff)
	for _, id := range ids {
		sp := s.streams[id]
		if _, err := s.spillW.Write(sp.buf); err != nil {
			return fmt.Errorf("writing the import's spill file: %w", err)
		}
		sp.segs = append(sp.segs, segment{off: s.spillOff, size: uint32(len(sp.buf)), n: uint32(sp.nbuf)})
		s.spillOff += int64(len(sp.buf))
		if cap(sp.buf) > 64<<10 {
			sp.buf = nil // let a large buffer go while others fill theirs
		} else {
			sp.buf = sp.buf[:0]
		}
		sp.nbuf = 0
	}
	s.buffered = 0
	if err := s.spillW.Flush(); err != nil {
		return fmt.Errorf("writing the import's spill file: %w", err)
	}
	return nil
}

// discard removes every spool; the import failed.
func (s *sink) discard() {
	if s.spill != nil {
		s.spill.Close()
		os.Remove(s.spill.Name())
		s.spill = nil
	}
	s.streams = map[int]*spool{}
	s.buffered = 0
}

// finish writes the final streams: spool id becomes the stream of the
// rank final[id] names (a spool final does not name is dropped; several
// spools of one rank are joined, in id order), its times moved by
// shift[id] ns. It returns the manifest's rank entries, in rank order.
func (s *sink) finish(final map[int]trace.RankInfo, shift map[int]int64) ([]trace.RankEntry, error) {
	defer s.discard()
	ids := make([]int, 0, len(s.streams))
	for id := range s.streams {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	byRank := map[int][]*spool{}
	var ranks []int
	for _, id := range ids {
		sp := s.streams[id]
		info, ok := final[id]
		if !ok {
			continue
		}
		if byRank[info.Rank] == nil {
			ranks = append(ranks, info.Rank)
		}
		byRank[info.Rank] = append(byRank[info.Rank], sp)
	}
	sort.Ints(ranks)
	rd := &spillReader{s: s}
	var entries []trace.RankEntry
	for _, rank := range ranks {
		sps := byRank[rank]
		info := final[sps[0].id]
		info.RunID = s.runID
		if err := s.write(rd, sps, filepath.Join(s.dir, trace.RankFile(rank)), info, shift); err != nil {
			return nil, fmt.Errorf("writing rank %d's stream: %w", rank, err)
		}
		for _, sp := range sps {
			s.events += sp.n
		}
		entries = append(entries, trace.RankEntry{Rank: rank, Host: info.Host, PID: info.PID, File: trace.RankFile(rank)})
	}
	return entries, nil
}

// write writes one rank's stream at dst from its spools: in batches of
// batchEvents, each in start order (the time columns compress best so).
func (s *sink) write(rd *spillReader, sps []*spool, dst string, info trace.RankInfo, shift map[int]int64) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 256<<10)
	w, err := trace.NewWriter(bw, info, trace.WriterOptions{Codec: s.codec})
	if err != nil {
		out.Close()
		return err
	}
	batch := make([]trace.Event, 0, batchEvents)
	put := func(e trace.Event) error {
		batch = append(batch, e)
		if len(batch) < batchEvents {
			return nil
		}
		slices.SortStableFunc(batch, func(a, b trace.Event) int { return cmp.Compare(a.Start, b.Start) })
		err := w.Write(batch)
		batch = batch[:0]
		return err
	}
	for _, sp := range sps {
		emit := func(e trace.Event) error {
			e.Rank = int32(info.Rank)
			e.Start += shift[sp.id]
			return put(e)
		}
		for _, seg := range sp.segs {
			b, err := rd.read(seg)
			if err != nil {
				out.Close()
				return err
			}
			if err := s.decodeAll(b, int(seg.n), emit); err != nil {
				out.Close()
				return err
			}
		}
		if err := s.decodeAll(sp.buf, sp.nbuf, emit); err != nil {
			out.Close()
			return err
		}
	}
	slices.SortStableFunc(batch, func(a, b trace.Event) int { return cmp.Compare(a.Start, b.Start) })
	if err := w.Write(batch); err != nil {
		out.Close()
		return err
	}
	if err := w.Close(); err != nil {
		out.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// spillReader reads segments of the spill file through a window per
// spill pass, so that streams read in the order they were spilled cost
// few reads however many passes interleave them.
type spillReader struct {
	s    *sink
	wins map[int64]*window // by the pass's first offset
}

type window struct {
	b    []byte
	base int64 // the file offset of b[0]
}

func (r *spillReader) read(seg segment) ([]byte, error) {
	i := sort.Search(len(r.s.passes), func(i int) bool { return r.s.passes[i] > seg.off }) - 1
	if i < 0 {
		return nil, errSpill
	}
	pass, passEnd := r.s.passes[i], r.s.spillOff
	if i+1 < len(r.s.passes) {
		passEnd = r.s.passes[i+1]
	}
	if r.wins == nil {
		r.wins = map[int64]*window{}
	}
	w := r.wins[pass]
	if w == nil {
		w = &window{}
		r.wins[pass] = w
	}
	end := seg.off + int64(seg.size)
	if seg.off >= w.base && end <= w.base+int64(len(w.b)) {
		return w.b[seg.off-w.base : end-w.base], nil
	}
	// Windows take at most 32 MiB together.
	size := int64(max(64<<10, min(1<<20, (32<<20)/len(r.s.passes))))
	n := min(max(int64(seg.size), size), passEnd-seg.off)
	if int64(cap(w.b)) < n {
		w.b = make([]byte, n)
	}
	w.b = w.b[:n]
	if _, err := r.s.spill.ReadAt(w.b, seg.off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the import's spill file: %w", err)
	}
	w.base = seg.off
	return w.b[:seg.size], nil
}

// The spill encoding of an event: its kind, then its integers as
// varints, its value's bits, and its strings as an index into the sink's
// table plus one (0: the string follows, its length first). Rank is not
// kept: finish sets it.

func (s *sink) putString(b []byte, v string) []byte {
	if id, ok := s.strID[v]; ok {
		return binary.AppendUvarint(b, uint64(id)+1)
	}
	if len(s.strs) < maxStrings {
		s.strID[v] = uint32(len(s.strs))
		s.strs = append(s.strs, v)
		return binary.AppendUvarint(b, uint64(len(s.strs)))
	}
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func (s *sink) encode(b []byte, e *trace.Event) []byte {
	b = append(b, byte(e.Kind))
	for _, v := range [...]int64{e.Start, e.Dur, e.Bytes, int64(e.Peer), e.Seq, int64(e.Step), int64(e.Root), int64(e.Chunk), e.Wait} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, math.Float64bits(e.Value))
	for _, v := range [...]string{e.Name, e.Algo, e.DType, e.Comm, e.Label} {
		b = s.putString(b, v)
	}
	return b
}

var errSpill = errors.New("the import's spill file is damaged")

// decodeAll decodes n events from b, calling f with each.
func (s *sink) decodeAll(b []byte, n int, f func(trace.Event) error) error {
	var ints [9]int64
	var strs [5]string
	for range n {
		if len(b) == 0 {
			return errSpill
		}
		e := trace.Event{Kind: trace.Kind(b[0])}
		b = b[1:]
		for i := range ints {
			v, k := binary.Varint(b)
			if k <= 0 {
				return errSpill
			}
			ints[i], b = v, b[k:]
		}
		bits, k := binary.Uvarint(b)
		if k <= 0 {
			return errSpill
		}
		b = b[k:]
		for i := range strs {
			id, k := binary.Uvarint(b)
			if k <= 0 {
				return errSpill
			}
			b = b[k:]
			if id > 0 {
				if id > uint64(len(s.strs)) {
					return errSpill
				}
				strs[i] = s.strs[id-1]
				continue
			}
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return errSpill
			}
			strs[i], b = string(b[k:k+int(l)]), b[k+int(l):]
		}
		e.Start, e.Dur, e.Bytes, e.Peer, e.Seq = ints[0], ints[1], ints[2], int32(ints[3]), ints[4]
		e.Step, e.Root, e.Chunk, e.Wait = int32(ints[5]), int32(ints[6]), int32(ints[7]), ints[8]
		e.Value = math.Float64frombits(bits)
		e.Name, e.Algo, e.DType, e.Comm, e.Label = strs[0], strs[1], strs[2], strs[3], strs[4]
		if err := f(e); err != nil {
			return err
		}
	}
	return nil
}

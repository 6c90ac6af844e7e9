package importers

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/commprof/commprof/trace"
)

// batchEvents is how many events a stream batch holds.
const batchEvents = 16384

// bufferedEvents bounds the events all streams hold before they are
// written, so that memory follows the events kept, not the rank count:
// past it the stream holding the most writes its batch.
const bufferedEvents = 1 << 18

// maxOpenSpools bounds the spool files open at once: a run of 65,536
// ranks must not need as many file descriptors.
const maxOpenSpools = 256

// codecSpools is how many spools are compressed as they are written: a
// compressor holds MBs, so the spools past these are written plain and
// compressed one at a time at finish.
const codecSpools = 16

// sink writes an import's events into a run directory, one stream per
// rank. A parser does not always know a stream's final rank, the world
// size or the run's epoch before its input ends (a Horovod timeline names
// its ranks as they appear; a Kineto file may say its rank after its
// events), so each stream is first written to a spool file with the
// facts known then; finish rewrites the spools whose facts changed (a
// batch at a time, in bounded memory) and renames the others.
type sink struct {
	dir     string
	codec   trace.Codec
	runID   string
	streams map[int]*spool
	events  int64
	// buffered counts the events the spools hold unwritten; open lists
	// the spool files open, oldest first.
	buffered int
	open     []*lazyFile
}

// lazyFile is a spool's file, opened when written to and closed when
// too many others are open.
type lazyFile struct {
	s    *sink
	path string
	f    *os.File
}

func (l *lazyFile) Write(p []byte) (int, error) {
	if l.f == nil {
		if len(l.s.open) >= maxOpenSpools {
			old := l.s.open[0]
			l.s.open = l.s.open[1:]
			if err := old.close(); err != nil {
				return 0, err
			}
		}
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return 0, err
		}
		l.f = f
		l.s.open = append(l.s.open, l)
	}
	return l.f.Write(p)
}

func (l *lazyFile) close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// spool is one stream being written.
type spool struct {
	id    int
	path  string
	f     *lazyFile
	s     *sink
	bw    *bufio.Writer
	codec trace.Codec
	w     *trace.Writer
	info  trace.RankInfo
	buf   []trace.Event
	n     int64
}

func newSink(dir string, codec trace.Codec, runID string) *sink {
	return &sink{dir: dir, codec: codec, runID: runID, streams: map[int]*spool{}}
}

// stream returns stream id's spool, creating it with info (its rank and
// world as known now; Event.Rank must be info.Rank until finish).
func (s *sink) stream(id int, info trace.RankInfo) (*spool, error) {
	if sp := s.streams[id]; sp != nil {
		return sp, nil
	}
	info.RunID = s.runID
	if info.WorldSize <= info.Rank {
		info.WorldSize = info.Rank + 1
	}
	path := filepath.Join(s.dir, fmt.Sprintf(".spool-%05d.arrows", id))
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return nil, fmt.Errorf("creating a stream: %w", err)
	}
	f := &lazyFile{s: s, path: path}
	bw := bufio.NewWriterSize(f, 32<<10)
	codec := s.codec
	if len(s.streams) >= codecSpools {
		codec = trace.None
	}
	w, err := trace.NewWriter(bw, info, trace.WriterOptions{Codec: codec})
	if err != nil {
		s.closeFile(f)
		os.Remove(path)
		return nil, err
	}
	sp := &spool{id: id, path: path, f: f, s: s, bw: bw, codec: codec, w: w, info: info}
	s.streams[id] = sp
	return sp, nil
}

// add queues e for the stream, writing a batch when one is full.
func (sp *spool) add(e trace.Event) error {
	sp.buf = append(sp.buf, e)
	sp.s.buffered++
	if len(sp.buf) >= batchEvents {
		return sp.flush()
	}
	if sp.s.buffered >= bufferedEvents {
		return sp.s.flushLargest()
	}
	return nil
}

// flushLargest writes the batch of the stream holding the most events,
// and then any stream's holding more than the streams' share.
func (s *sink) flushLargest() error {
	var big *spool
	share := bufferedEvents / max(len(s.streams), 1)
	for _, sp := range s.streams {
		if big == nil || len(sp.buf) > len(big.buf) {
			big = sp
		}
		if len(sp.buf) > share {
			if err := sp.flush(); err != nil {
				return err
			}
		}
	}
	if big != nil {
		return big.flush()
	}
	return nil
}

// closeFile closes a spool's file and forgets it.
func (s *sink) closeFile(l *lazyFile) error {
	if i := slices.Index(s.open, l); i >= 0 {
		s.open = slices.Delete(s.open, i, i+1)
	}
	return l.close()
}

func (sp *spool) flush() error {
	if len(sp.buf) == 0 {
		return nil
	}
	// In start order within a batch: the time columns compress best so.
	slices.SortStableFunc(sp.buf, func(a, b trace.Event) int { return cmp.Compare(a.Start, b.Start) })
	if err := sp.w.Write(sp.buf); err != nil {
		return err
	}
	sp.n += int64(len(sp.buf))
	sp.s.buffered -= len(sp.buf)
	if cap(sp.buf) > batchEvents/4 && sp.s.buffered > bufferedEvents/2 {
		sp.buf = nil // let a large buffer go while others fill theirs
	} else {
		sp.buf = sp.buf[:0]
	}
	return nil
}

func (sp *spool) close() error {
	err := sp.flush()
	if err == nil {
		err = sp.w.Close()
	}
	if err == nil {
		err = sp.bw.Flush()
	}
	if cerr := sp.s.closeFile(sp.f); err == nil {
		err = cerr
	}
	return err
}

// discard removes every spool; the import failed.
func (s *sink) discard() {
	for _, sp := range s.streams {
		s.closeFile(sp.f)
		os.Remove(sp.path)
	}
	s.streams = map[int]*spool{}
}

// finish closes every spool and makes the final streams: spool id
// becomes the stream of the rank final[id] names (a spool final does not
// name is dropped; several spools of one rank are joined), its times
// moved by shift[id] ns. It returns the manifest's rank entries, in rank
// order.
func (s *sink) finish(final map[int]trace.RankInfo, shift map[int]int64) ([]trace.RankEntry, error) {
	ids := make([]int, 0, len(s.streams))
	for id := range s.streams {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var errs []error
	for _, id := range ids {
		if err := s.streams[id].close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.discard()
		return nil, fmt.Errorf("writing the streams: %w", err)
	}
	byRank := map[int][]*spool{}
	var ranks []int
	for _, id := range ids {
		sp := s.streams[id]
		info, ok := final[id]
		if !ok {
			os.Remove(sp.path)
			delete(s.streams, id)
			continue
		}
		if byRank[info.Rank] == nil {
			ranks = append(ranks, info.Rank)
		}
		byRank[info.Rank] = append(byRank[info.Rank], sp)
	}
	sort.Ints(ranks)
	var entries []trace.RankEntry
	for _, rank := range ranks {
		sps := byRank[rank]
		info := final[sps[0].id]
		info.RunID = s.runID
		dst := filepath.Join(s.dir, trace.RankFile(rank))
		var err error
		if len(sps) == 1 && info == sps[0].info && shift[sps[0].id] == 0 && sps[0].codec == s.codec {
			err = os.Rename(sps[0].path, dst)
		} else {
			err = s.rewrite(sps, dst, info, shift)
		}
		if err != nil {
			s.discard()
			return nil, fmt.Errorf("writing rank %d's stream: %w", rank, err)
		}
		for _, sp := range sps {
			s.events += sp.n
			delete(s.streams, sp.id)
		}
		entries = append(entries, trace.RankEntry{Rank: rank, Host: info.Host, PID: info.PID, File: trace.RankFile(rank)})
	}
	s.streams = map[int]*spool{}
	return entries, nil
}

// rewrite copies spools into dst with the final rank facts and times.
func (s *sink) rewrite(sps []*spool, dst string, info trace.RankInfo, shift map[int]int64) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	w, err := trace.NewWriter(bw, info, trace.WriterOptions{Codec: s.codec})
	if err != nil {
		out.Close()
		return err
	}
	for _, sp := range sps {
		if err := copySpool(sp.path, w, int32(info.Rank), shift[sp.id]); err != nil {
			out.Close()
			return err
		}
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

// copySpool writes a spool's events to w, batch by batch, with rank and
// times set, and removes the spool.
func copySpool(path string, w *trace.Writer, rank int32, shift int64) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() {
		in.Close()
		os.Remove(path)
	}()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	r, err := trace.NewReader(bufio.NewReaderSize(in, 1<<20), trace.ReaderOptions{Limit: st.Size() + 1<<20})
	if err != nil {
		return err
	}
	defer r.Release()
	var evs []trace.Event
	for {
		evs, err = r.Next(evs[:0])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for i := range evs {
			evs[i].Rank = rank
			evs[i].Start += shift
		}
		if err := w.Write(evs); err != nil {
			return err
		}
	}
}

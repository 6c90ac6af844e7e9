package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// RunFiles is a run directory opened without reading its events: the
// manifest and the rank streams, for analyses that stream a run batch by
// batch instead of holding it in memory.
type RunFiles struct {
	Dir      string
	Manifest *Manifest // nil if the run has no manifest
	Streams  []StreamFile
	// Problems lists what was wrong but not fatal (a missing manifest, a
	// missing rank); ScanStream reports cut streams itself.
	Problems []error
}

// StreamFile is one rank stream of a run.
type StreamFile struct {
	Rank  int // from the file name; the stream's metadata must agree
	Path  string
	Bytes int64 // size on disk
}

// OpenRun lists a run directory: its manifest and rank streams.
func OpenRun(dir string) (*RunFiles, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", dir, err)
	}
	run := &RunFiles{Dir: dir}
	m, err := ReadManifest(dir)
	switch {
	case err == nil:
		run.Manifest = m
		run.Problems = append(run.Problems, checkClocks(dir, m)...)
	case errors.Is(err, fs.ErrNotExist):
		run.Problems = append(run.Problems, fmt.Errorf("%s has no %s: clock drift and the run's configuration are unknown", dir, ManifestFile))
	default:
		return nil, err
	}
	byRank := map[int]int{} // rank -> index in Streams
	for _, e := range ents {
		sm := rankFileRE.FindStringSubmatch(e.Name())
		if sm == nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		r, err := strconv.Atoi(sm[1])
		if err != nil || r >= MaxWorldSize {
			run.Problems = append(run.Problems, fmt.Errorf("%s names rank %s, beyond the %d ranks a run may have; ignored", path, sm[1], MaxWorldSize))
			continue
		}
		// A symbolic link to a stream is followed, as for run.json; a
		// FIFO would block every reader and a directory cannot be read.
		// The readers check again on the file they open (openRegular).
		info, err := os.Stat(path)
		if err != nil {
			run.Problems = append(run.Problems, fmt.Errorf("%s: %w; ignored", path, err))
			continue
		}
		if !info.Mode().IsRegular() {
			run.Problems = append(run.Problems, fmt.Errorf("%s is not a regular file (%s); ignored", path, info.Mode().Type()))
			continue
		}
		sf := StreamFile{Rank: r, Path: path, Bytes: info.Size()}
		if j, dup := byRank[r]; dup {
			// Two files for one rank (rank-00000 and rank-000000): keep
			// the one commprof writes, never count both.
			keep, drop := run.Streams[j], sf
			if e.Name() == RankFile(r) {
				keep, drop = sf, run.Streams[j]
				run.Streams[j] = sf
			}
			run.Problems = append(run.Problems, fmt.Errorf("%s is a second stream of rank %d beside %s; ignored", drop.Path, r, filepath.Base(keep.Path)))
			continue
		}
		byRank[r] = len(run.Streams)
		run.Streams = append(run.Streams, sf)
	}
	if len(run.Streams) == 0 {
		return nil, fmt.Errorf("%w: %s holds no rank-NNNNN.arrows streams", ErrNotTrace, dir)
	}
	sort.Slice(run.Streams, func(i, j int) bool { return run.Streams[i].Rank < run.Streams[j].Rank })
	world := 0
	if m != nil {
		world = m.WorldSize
	}
	if last := run.Streams[len(run.Streams)-1].Rank; last >= world && m != nil {
		run.Problems = append(run.Problems, fmt.Errorf("%s holds a stream of rank %d, but %s says the world has %d ranks", dir, last, ManifestFile, world))
	}
	if miss := missingRanks(run.Streams, world); miss != "" {
		run.Problems = append(run.Problems, fmt.Errorf("%s no stream in %s", miss, dir))
	}
	return run, nil
}

// missingRanks says which of the world's ranks have no stream, as ranges
// with their verb ("rank 3 has", "5 ranks (2, 5-8) have"), in time and
// space bounded by the streams, not the world.
func missingRanks(streams []StreamFile, world int) string {
	var parts []string
	n := 0
	gap := func(lo, hi int) { // [lo, hi) has no stream
		if lo >= hi {
			return
		}
		n += hi - lo
		if len(parts) == 8 {
			parts = append(parts, "...")
		}
		if len(parts) > 8 {
			return
		}
		if hi-lo == 1 {
			parts = append(parts, strconv.Itoa(lo))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", lo, hi-1))
		}
	}
	next := 0
	for _, s := range streams {
		if s.Rank >= world {
			break
		}
		gap(next, s.Rank)
		next = s.Rank + 1
	}
	gap(next, world)
	switch {
	case n == 0:
		return ""
	case n == 1:
		return "rank " + parts[0] + " has"
	}
	return fmt.Sprintf("%d ranks (%s) have", n, strings.Join(parts, ", "))
}

// WorldSize returns the run's world size: the manifest's, else one more
// than the highest rank with a stream.
func (r *RunFiles) WorldSize() int {
	if r.Manifest != nil && r.Manifest.WorldSize > 0 {
		return r.Manifest.WorldSize
	}
	return r.Streams[len(r.Streams)-1].Rank + 1
}

// ScanStream reads stream i batch by batch and calls fn with each batch,
// its start times already moved onto rank 0's clock. cols names the
// columns to decode (nil for all; see ReaderOptions.Columns). The Batch is
// reused: fn must not keep or change it. A cut stream scans every complete batch and then
// returns a *TruncatedError (wrapped with the file's name); an error from
// fn stops the scan and is returned as is.
func (r *RunFiles) ScanStream(i int, cols []string, fn func(info RankInfo, b *Batch) error) error {
	return r.scanStream(i, cols, nil, nil, fn)
}

// ScanStreamWithin is ScanStream, passing over the batches none of whose
// events overlaps [from, to) by the run's clock (start < to and start +
// dur >= from, as a timeline's window holds them): those batches'
// columns other than start and dur are not decoded, and fn does not see
// them. spans, if not nil, are the stream's batches' extents by the run's
// clock, as a read before saw them (BatchSpan): a batch whose extent
// misses the window is then not decoded at all.
func (r *RunFiles) ScanStreamWithin(i int, cols []string, from, to int64, spans [][2]int64, fn func(info RankInfo, b *Batch) error) error {
	return r.scanStream(i, cols, nil, &window{from, to, spans}, fn)
}

// window is what ScanStreamWithin reads.
type window struct {
	from, to int64
	spans    [][2]int64
}

// BatchSpan is the extent of b's events: their first start and last
// end, for ScanStreamWithin's spans; ok is false for a batch without
// start and dur or without events.
func BatchSpan(b *Batch) (span [2]int64, ok bool) {
	if b.Len == 0 || len(b.Start) < b.Len || len(b.Dur) < b.Len {
		return span, false
	}
	span = [2]int64{b.Start[0], b.Start[0] + b.Dur[0]}
	for j, t := range b.Start[:b.Len] {
		span[0], span[1] = min(span[0], t), max(span[1], t+b.Dur[j])
	}
	return span, true
}

// readerPool holds the 1 MiB read buffers of streams read, for the
// streams read after: a run of 512 ranks made 512 of them, 500 MB of
// garbage for one read.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<20) }}

// scanStream is ScanStream, calling start (if not nil) with the stream's
// facts once its schema is read, before any batch.
func (r *RunFiles) scanStream(i int, cols []string, start func(RankInfo) error, within *window, fn func(info RankInfo, b *Batch) error) error {
	s := r.Streams[i]
	f, st, err := openRegular(s.Path)
	if err != nil {
		return fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(f)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()
	rd, err := NewReader(br, ReaderOptions{Limit: st.Size() + 1<<20, Columns: cols})
	if err != nil {
		return fmt.Errorf("reading trace %s: %w", s.Path, err)
	}
	defer rd.Release()
	info := rd.Info()
	if info.Rank != s.Rank {
		return fmt.Errorf("%w: %s holds rank %d's events", ErrNotTrace, s.Path, info.Rank)
	}
	if start != nil {
		if err := start(info); err != nil {
			return err
		}
	}
	off, drift, at := clockOf(info, r.Manifest)
	var b Batch
	var aligned []int64
	var pass func(int) bool
	var keep func(*Batch) bool
	if w := within; w != nil {
		pass = func(k int) bool {
			// A batch beyond those known (a stream grown since) is
			// decoded for its times.
			return k < len(w.spans) && (w.spans[k][0] >= w.to || w.spans[k][1] < w.from)
		}
		keep = func(b *Batch) bool {
			for j, t := range b.Start[:b.Len] {
				if off != 0 || drift != 0 {
					t = alignTime(t, off, drift, at)
				}
				if t < w.to && t+b.Dur[j] >= w.from {
					return true
				}
			}
			return false
		}
	}
	for {
		err := rd.NextBatchWhere(&b, pass, keep)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading trace %s: %w", s.Path, err)
		}
		if (off != 0 || drift != 0) && b.Start != nil {
			// Into a slice of its own: the batch's may be the reader's
			// memory of the previous batch.
			aligned = grow(aligned, b.Len)
			for j, t := range b.Start[:b.Len] {
				aligned[j] = alignTime(t, off, drift, at)
			}
			b.Start = aligned
		}
		if err := fn(info, &b); err != nil {
			return err
		}
	}
}

// maxClockOffset bounds a rank's clock offset (about 36 years of ns), and
// maxDrift its drift (1%, where real clocks drift by some parts per
// million): an aligned time then stays far inside int64.
const (
	maxClockOffset = 1 << 60
	maxDrift       = 0.01
)

// checkClocks sets aside the clock corrections of m that no clock can
// need (a damaged or hand-edited run.json), so that they move no time
// out of range: the rank's times are then read as written.
func checkClocks(dir string, m *Manifest) []error {
	var out []error
	for i := range m.Ranks {
		e := &m.Ranks[i]
		if e.ClockOffsetNS >= -maxClockOffset && e.ClockOffsetNS <= maxClockOffset && e.SyncedAtNS >= -maxTime && e.SyncedAtNS <= maxTime &&
			!math.IsNaN(e.ClockDrift) && math.Abs(e.ClockDrift) <= maxDrift {
			continue
		}
		out = append(out, fmt.Errorf("%s: rank %d's clock_offset_ns %d, clock_drift %g, synced_at_ns %d are beyond what a clock can need; its times are read unaligned",
			filepath.Join(dir, ManifestFile), e.Rank, e.ClockOffsetNS, e.ClockDrift, e.SyncedAtNS))
		e.ClockOffsetNS, e.ClockDrift, e.SyncedAtNS = 0, 0, 0
	}
	return out
}

// alignTime moves a time onto rank 0's clock, within ±2^62 ns.
func alignTime(t, off int64, drift float64, at int64) int64 {
	return min(max(t+off+int64(drift*float64(t-at)), -maxTime), maxTime)
}

// clockOf returns the correction that puts a rank's times on rank 0's
// clock: start + off + drift*(start-at).
func clockOf(info RankInfo, m *Manifest) (off int64, drift float64, at int64) {
	off = info.ClockOffsetNS
	if m != nil {
		for _, e := range m.Ranks {
			if e.Rank == info.Rank {
				off, drift, at = e.ClockOffsetNS, e.ClockDrift, e.SyncedAtNS
			}
		}
	}
	return off, drift, at
}

package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
	case errors.Is(err, fs.ErrNotExist):
		run.Problems = append(run.Problems, fmt.Errorf("%s has no %s: clock drift and the run's configuration are unknown", dir, ManifestFile))
	default:
		return nil, err
	}
	for _, e := range ents {
		sm := rankFileRE.FindStringSubmatch(e.Name())
		if sm == nil {
			continue
		}
		r, err := strconv.Atoi(sm[1])
		if err != nil {
			continue
		}
		sf := StreamFile{Rank: r, Path: filepath.Join(dir, e.Name())}
		if info, err := e.Info(); err == nil {
			sf.Bytes = info.Size()
		}
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
	seen := map[int]bool{}
	for _, s := range run.Streams {
		seen[s.Rank] = true
	}
	for r := range world {
		if !seen[r] {
			run.Problems = append(run.Problems, fmt.Errorf("rank %d has no stream in %s", r, dir))
		}
	}
	return run, nil
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
	s := r.Streams[i]
	f, err := os.Open(s.Path)
	if err != nil {
		return fmt.Errorf("opening trace: %w", err)
	}
	defer f.Close()
	rd, err := NewReader(bufio.NewReaderSize(f, 1<<20), ReaderOptions{Limit: s.Bytes + 1<<20, Columns: cols})
	if err != nil {
		return fmt.Errorf("reading trace %s: %w", s.Path, err)
	}
	defer rd.Release()
	info := rd.Info()
	if info.Rank != s.Rank {
		return fmt.Errorf("%w: %s holds rank %d's events", ErrNotTrace, s.Path, info.Rank)
	}
	off, drift, at := clockOf(info, r.Manifest)
	var b Batch
	var aligned []int64
	for {
		err := rd.NextBatch(&b)
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
				aligned[j] = t + off + int64(drift*float64(t-at))
			}
			b.Start = aligned
		}
		if err := fn(info, &b); err != nil {
			return err
		}
	}
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

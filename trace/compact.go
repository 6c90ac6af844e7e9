package trace

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// CompactOptions configure Compact.
type CompactOptions struct {
	Codec       Codec // of the rewritten stream; default Zstd
	Level       Level // default LevelFast; LevelSmallest for the smallest file
	BatchEvents int   // events per rewritten batch at most (default 65536)
}

// CompactResult says what Compact did.
type CompactResult struct {
	Events                      int64
	BatchesBefore, BatchesAfter int64
	BytesBefore, BytesAfter     int64
	Replaced                    bool // false when the rewrite was not smaller and the stream was kept
}

// Compact rewrites a complete stream in place as few large batches.
//
// A recording flushes a batch at least every second so that a killed
// rank loses little; a training rank writes about a thousand events a
// second, and each batch then carries almost a kilobyte of metadata and
// compresses its columns alone. Rewritten in batches of BatchEvents, the
// same events take about a quarter less space and read faster.
//
// The rewrite goes to a temporary file beside path that replaces it only
// once it is complete, synced, and smaller; on any error the stream is
// left as it was. A cut stream is not compacted: it is evidence of how
// its rank died.
func Compact(path string, opt CompactOptions) (res CompactResult, err error) {
	if opt.Codec == "" {
		opt.Codec = Zstd
	}
	if opt.BatchEvents <= 0 {
		opt.BatchEvents = 1 << 16
	}
	in, err := os.Open(path)
	if err != nil {
		return res, fmt.Errorf("compacting: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return res, fmt.Errorf("compacting: %w", err)
	}
	res.BytesBefore = st.Size()
	rd, err := NewReader(in, ReaderOptions{})
	if err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	defer rd.Release()

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".compact-*")
	if err != nil {
		return res, fmt.Errorf("compacting: %w", err)
	}
	defer func() {
		if !res.Replaced {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w, err := NewWriter(tmp, rd.Info(), WriterOptions{Codec: opt.Codec, Level: opt.Level})
	if err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	buf := make([]Event, 0, opt.BatchEvents)
	for {
		// A batch that would overflow buf is still read into it whole
		// (Next grows it); the streams worth compacting have small ones.
		var rerr error
		buf, rerr = rd.Next(buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return res, fmt.Errorf("compacting %s: %w", path, rerr)
		}
		if rerr == nil {
			res.BatchesBefore++
		}
		if len(buf) > 0 && (len(buf) >= opt.BatchEvents || rerr != nil) {
			// Batches are each in start order; so is the merged one, whose
			// time columns then compress best.
			slices.SortStableFunc(buf, func(a, b Event) int { return cmp.Compare(a.Start, b.Start) })
			if err := w.Write(buf); err != nil {
				return res, fmt.Errorf("compacting %s: %w", path, err)
			}
			res.Events += int64(len(buf))
			buf = buf[:0]
		}
		if rerr != nil {
			break
		}
	}
	if err := w.Close(); err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	res.BatchesAfter = w.Batches()
	if err := tmp.Sync(); err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	out, err := tmp.Stat()
	if err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	res.BytesAfter = out.Size()
	if res.BytesAfter >= res.BytesBefore {
		res.BytesAfter, res.BatchesAfter = res.BytesBefore, res.BatchesBefore
		return res, nil
	}
	if err := tmp.Close(); err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	// The new file keeps the old one's permissions.
	if err := os.Chmod(tmp.Name(), st.Mode().Perm()); err != nil {
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return res, fmt.Errorf("compacting %s: %w", path, err)
	}
	res.Replaced = true
	// The rename itself is made durable where the filesystem allows.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return res, nil
}

package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/trace"
)

// ParquetFile is the name of a rank's file in its partition directory:
// DIR/rank=N/part-0.parquet.
const ParquetFile = "part-0.parquet"

// ParquetPartition returns the Hive-style partition directory of rank r,
// relative to the export's directory.
func ParquetPartition(r int) string { return "rank=" + strconv.Itoa(r) }

// ParquetOptions configure Parquet.
type ParquetOptions struct {
	// Force writes into a directory that is not empty, replacing the
	// Parquet files of an earlier export in it and removing every other
	// file ending in .parquet under it, so that the directory holds this
	// run's table and nothing else an engine would read as part of it.
	Force bool
	// RowGroupRows bounds each row group (0: trace.ParquetRowGroupRows).
	RowGroupRows int
	// Workers is how many ranks are written at once (0: up to 4, no more
	// than GOMAXPROCS). Memory is about a row group per worker.
	Workers int
	// Warn is told of each problem that does not stop the export: a cut
	// stream (exported up to the cut), a stream that is not a trace (left
	// out), a stream cut before it held anything (no file).
	Warn func(error)
}

// ParquetResult says what Parquet wrote.
type ParquetResult struct {
	Files int   // Parquet files written, one per rank with a readable stream
	Rows  int64 // events, all files together
	Bytes int64 // bytes of the files
}

// Parquet writes the run rf as one table of every event, partitioned by
// rank Hive-style: dir/rank=N/part-0.parquet holds rank N's events
// (trace.RunFiles.WriteParquet gives the columns). Ranks are read and
// written a few at a time, each stream once, so memory is bounded by a
// row group per worker whatever the run's length. Each file is written
// whole or not at all (a temporary file renamed into place); when the
// export fails or ctx is done, the files it wrote are removed again.
//
// dir must be a new or empty directory unless opt.Force is set.
func Parquet(ctx context.Context, rf *trace.RunFiles, dir string, opt ParquetOptions) (ParquetResult, error) {
	var res ParquetResult
	if err := prepareDir(dir, opt.Force); err != nil {
		return res, err
	}
	warn := opt.Warn
	if warn == nil {
		warn = func(error) {}
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = min(4, runtime.GOMAXPROCS(0))
	}
	// The workers stop at the first failure; ctx is the caller's.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([]rankOut, len(rf.Streams))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				outs[i] = writeRank(wctx, rf, i, dir, opt.RowGroupRows)
				if outs[i].err != nil && !skippable(outs[i].err) {
					cancel()
				}
			}
		}()
	}
	for i := range rf.Streams {
		if wctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()

	var fatal []error
	written := map[string]bool{}
	for i, o := range outs {
		switch {
		case o.path != "":
			written[o.path] = true
			res.Files++
			res.Rows += o.rows
			res.Bytes += o.size
			if o.err != nil {
				warn(fmt.Errorf("%w; exported the events before the cut", o.err))
			}
		case o.err == nil: // not reached: the export stopped before it
		case skippable(o.err):
			warn(fmt.Errorf("%w; no file for rank %d", o.err, rf.Streams[i].Rank))
		case !errors.Is(o.err, context.Canceled):
			fatal = append(fatal, o.err)
		}
	}
	if err := ctx.Err(); err != nil && len(fatal) == 0 {
		fatal = append(fatal, err)
	}
	if len(fatal) > 0 {
		for p := range written {
			os.Remove(p)
		}
		removeEmptyPartitions(dir)
		return ParquetResult{}, errors.Join(fatal...)
	}
	removeEmptyPartitions(dir)
	if res.Files == 0 {
		return res, fmt.Errorf("%s: none of the run's streams could be exported", rf.Dir)
	}
	if opt.Force {
		if err := removeOtherParquet(dir, written); err != nil {
			return res, err
		}
	}
	return res, nil
}

// skippable reports whether a rank's error leaves it out of the export
// without failing it: a stream that is not a trace, or one cut before it
// held its schema.
func skippable(err error) bool {
	return errors.Is(err, trace.ErrNotTrace) || errors.Is(err, trace.ErrTruncated)
}

// rankOut is what writing one rank's file came to: the file (empty when
// none was written) and its rows and bytes; err is set for a cut stream
// whose file holds the events before the cut, too.
type rankOut struct {
	path       string
	rows, size int64
	err        error
}

// writeRank writes stream i into its partition.
func writeRank(ctx context.Context, rf *trace.RunFiles, i int, dir string, rowGroup int) rankOut {
	if err := ctx.Err(); err != nil {
		return rankOut{err: err}
	}
	part := filepath.Join(dir, ParquetPartition(rf.Streams[i].Rank))
	if err := os.MkdirAll(part, 0o777); err != nil {
		return rankOut{err: fmt.Errorf("creating %s: %w", part, err)}
	}
	path := filepath.Join(part, ParquetFile)
	var o rankOut
	size, err := atomicfile.Write(ctx, path, func(w io.Writer) error {
		cw := &countWriter{w: w}
		rows, _, err := rf.WriteParquet(ctx, i, cw, trace.ParquetOptions{RowGroupRows: rowGroup})
		o.rows = rows
		if errors.Is(err, trace.ErrTruncated) && cw.n > 0 {
			// A valid file of the events before the cut; a stream cut
			// before its schema gets none.
			o.err = err
			return nil
		}
		return err
	})
	if err != nil {
		if !skippable(err) {
			err = fmt.Errorf("writing %s: %w", path, err)
		}
		return rankOut{err: err}
	}
	o.path, o.size = path, size
	return o
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// prepareDir makes sure dir is a directory the export may write into:
// new, empty, or (with force) holding anything.
func prepareDir(dir string, force bool) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is a file: a Parquet export is a directory (rank=N/%s for each rank); give a new or empty directory with -o", dir, ParquetFile)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	if len(ents) > 0 && !force {
		var names []string
		for _, e := range ents[:min(3, len(ents))] {
			names = append(names, e.Name())
		}
		more := ""
		if len(ents) > 3 {
			more = ", ..."
		}
		return fmt.Errorf("%s is not empty (%s%s): a Parquet export writes into a new or empty directory, so that an engine reading %s/**/*.parquet reads this run and nothing else; give another directory with -o, or --force to replace what is there",
			dir, strings.Join(names, ", "), more, dir)
	}
	return nil
}

// removeOtherParquet removes every file ending in .parquet under dir but
// those just written, and the partition directories left empty.
func removeOtherParquet(dir string, keep map[string]bool) error {
	var errs []error
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".parquet") && !keep[p] {
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("removing an earlier export's %s: %w", p, err))
			}
		}
		return nil
	})
	removeEmptyPartitions(dir)
	return errors.Join(append(errs, err)...)
}

// removeEmptyPartitions removes the rank=N directories under dir that
// hold nothing.
func removeEmptyPartitions(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "rank=") {
			os.Remove(filepath.Join(dir, e.Name())) // fails, as meant, unless empty
		}
	}
}

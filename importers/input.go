package importers

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// input is one file opened for import: decompressed when gzipped, its
// reads counted for progress and stopped when the context is done.
type input struct {
	path   string
	size   int64 // bytes on disk
	gzip   bool
	f      *os.File
	raw    *countingReader
	gz     *gzip.Reader
	r      *bufio.Reader // the decompressed content
	gate   *recordGate
	stop   func() bool
	closed bool
}

// countingReader counts the bytes read from a file, reports them, and
// fails reads once the context is done, so that a parser stops where it
// is and keeps what it read.
type countingReader struct {
	ctx      context.Context
	r        io.Reader
	n        int64
	progress func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if err != nil && c.ctx.Err() != nil {
		err = c.ctx.Err() // a read stopped by the deadline set on cancel
	}
	c.n += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.n)
	}
	return n, err
}

// openInput opens path, undoing gzip when its first bytes are gzip's
// magic number (not from its name).
func openInput(ctx context.Context, path string, progress func(file string, done, total int64)) (*input, error) {
	f, err := openStopping(ctx, path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory", path)
	}
	in := &input{path: path, size: st.Size(), f: f}
	// A read blocked on a pipe or FIFO returns when the import is
	// stopped (SIGINT, SIGTERM): the poller's deadline ends it. Regular
	// files take no deadline and are checked between reads.
	in.stop = context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	in.raw = &countingReader{ctx: ctx, r: f}
	if progress != nil {
		in.raw.progress = func(n int64) { progress(path, n, in.size) }
	}
	br := bufio.NewReaderSize(in.raw, 1<<20)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			in.stop()
			f.Close()
			return nil, &InputError{File: path, Offset: 0, Msg: "gzip header", Err: err}
		}
		gz.Multistream(true)
		in.gzip, in.gz = true, gz
		in.gate = &recordGate{r: gzipCut{gz}}
	} else {
		in.gate = &recordGate{r: br}
	}
	in.r = bufio.NewReaderSize(in.gate, 1<<20)
	return in, nil
}

// maxSearch is how far into an input's content (after gzip) a record of
// its format is looked for before the input is refused: /dev/zero, a
// sparse file or random bytes are not read to their end, and a long log
// whose records start late is still read.
const maxSearch = 64 << 20

// errNoRecord ends the reading of an input in which no record of its
// format was found in its first maxSearch bytes.
var errNoRecord = fmt.Errorf("no record of the format in the first %d MiB", maxSearch>>20)

// recordGate passes an input's content until maxSearch bytes have been
// read without the parser finding a record of its format (found).
type recordGate struct {
	r     io.Reader
	n     int64
	found bool
	hit   bool // the input was stopped here
}

func (g *recordGate) Read(p []byte) (int, error) {
	if g.found {
		return g.r.Read(p)
	}
	left := maxSearch - g.n
	if left <= 0 {
		g.hit = true
		return 0, errNoRecord
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	return n, err
}

// found tells the input that a record of its format was read: it is read
// to its end from here.
func (in *input) found() { in.gate.found = true }

// noRecord returns the refusal of an input in which no record of format
// was found in its first maxSearch bytes, or nil.
func (in *input) noRecord(format string) error {
	if !in.gate.hit {
		return nil
	}
	what := map[string]string{
		Horovod:       "not a Horovod timeline: no trace event",
		Kineto:        "not a PyTorch profiler trace: no trace event",
		NCCLLog:       "not an NCCL debug log: no line with NCCL's host:pid:tid prefix",
		NCCLInspector: "not NCCL Inspector output: no coll_perf record",
		NCCLTests:     "not nccl-tests output: no parameters, rank, or table header line",
	}[format]
	if what == "" {
		what = "not a trace commprof imports: no record of any format it reads"
	}
	return notFormat(in.path, 0, maxSearch, "%s in its first %d MiB", what, maxSearch>>20)
}

// openStopping opens path for reading. Opening a FIFO waits for its
// writer, in the kernel, where no deadline reaches: the open is made
// aside, and when ctx is done first (SIGINT, SIGTERM) the import stops
// there, releasing the open by being, for an instant, the FIFO's writer.
func openStopping(ctx context.Context, path string) (*os.File, error) {
	if st, err := os.Stat(path); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return os.Open(path)
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-ctx.Done():
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		go func() {
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, fmt.Errorf("the import was interrupted while waiting for a writer to open the FIFO %s: %w", path, ctx.Err())
	}
}

// errGzipCut is the end of a gzip stream before its end: the file was
// cut. gzip says io.ErrUnexpectedEOF, which a JSON decoder would take for
// its own (a value cut short, or an array left open after a whole event,
// as older Horovod versions leave theirs): it must stay a cut.
var errGzipCut = errors.New("the file ends in the middle of its gzip stream (cut)")

// gzipCut reads a gzip stream, reporting a stream that stops short as
// errGzipCut.
type gzipCut struct{ r io.Reader }

func (g gzipCut) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errGzipCut
	}
	return n, err
}

// peek returns up to n bytes of the decompressed content without
// consuming them; a short input gives fewer.
func (in *input) peek(n int) []byte {
	b, _ := in.r.Peek(n)
	return b
}

// readErr describes a read error that ended an input early: a cut file,
// a damaged gzip stream, an interrupted import.
func readErr(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "the import was interrupted"
	case errors.Is(err, errGzipCut):
		return errGzipCut.Error()
	case errors.Is(err, errNoRecord):
		return errNoRecord.Error()
	case errors.Is(err, gzip.ErrChecksum):
		return "the gzip checksum does not match (damaged)"
	}
	return err.Error()
}

func (in *input) Close() error {
	if in.closed {
		return nil
	}
	in.closed = true
	in.stop()
	if in.gz != nil {
		in.gz.Close()
	}
	return in.f.Close()
}

// expandPaths turns the command's arguments into files: a directory
// stands for the regular files directly inside it (not hidden ones), in
// name order.
func expandPaths(args []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		var files []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
				continue
			}
			files = append(files, filepath.Join(a, e.Name()))
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no files to import", a)
		}
		sort.Strings(files)
		for _, f := range files {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no input files")
	}
	return out, nil
}

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
	f, err := os.Open(path)
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
		in.r = bufio.NewReaderSize(gzipCut{gz}, 1<<20)
	} else {
		in.r = br
	}
	return in, nil
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

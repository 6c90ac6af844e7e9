// Package atomicfile writes a file whole or not at all: into a temporary
// file beside it, renamed over it once complete, so that a failure (a full
// disk, Ctrl-C) never leaves a half-written report or export behind.
package atomicfile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes path through write and returns the bytes written. It stops
// with ctx's error once ctx is done. An existing directory at path is an
// error that says so.
func Write(ctx context.Context, path string, write func(io.Writer) error) (int64, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return 0, fmt.Errorf("%s is a directory: give a file to write", path)
	}
	f, tmp, err := create(path)
	if err != nil {
		return 0, err
	}
	cw := &Counter{w: f, ctx: ctx}
	err = write(cw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return cw.N, nil
}

// create makes a new temporary file beside path, with the mode any file
// the user writes gets (0666 less the umask): a report is meant to be
// shared.
func create(path string) (*os.File, string, error) {
	for {
		var b [6]byte
		_, _ = rand.Read(b[:])
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp"+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, tmp, err
	}
}

// Counter counts the bytes written through it (N) and stops the writing
// with ctx's error once ctx is done.
type Counter struct {
	w   io.Writer
	ctx context.Context
	N   int64
}

// NewCounter counts what is written to w until ctx is done.
func NewCounter(ctx context.Context, w io.Writer) *Counter { return &Counter{w: w, ctx: ctx} }

// Write implements io.Writer.
func (c *Counter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	c.N += int64(n)
	return n, err
}

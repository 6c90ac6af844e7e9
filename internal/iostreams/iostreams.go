// Package iostreams is the one shape in which every commprof command gets
// its input and output: the streams, and whether each is a terminal (a
// progress bar on a terminal, one line per step in a log).
package iostreams

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's standard input, output and error.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY, outTTY, errTTY bool
}

// System is the process's own streams.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		inTTY: isTerminal(os.Stdin), outTTY: isTerminal(os.Stdout), errTTY: isTerminal(os.Stderr)}
}

// Test is streams of buffers, none a terminal: what a test runs a command
// with, and reads back.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdinTTY, IsStdoutTTY and IsStderrTTY say whether a stream is a
// terminal.
func (s *IOStreams) IsStdinTTY() bool  { return s.inTTY }
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// SetTTY marks the streams as terminals or not (for tests of what a
// terminal sees).
func (s *IOStreams) SetTTY(in, out, errOut bool) { s.inTTY, s.outTTY, s.errTTY = in, out, errOut }

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

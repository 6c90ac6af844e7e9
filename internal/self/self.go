// Package self finds this commprof binary and runs it again: the local
// ranks `record` starts, the helpers of injected faults, and each run
// `calibrate` and `sweep` record are this binary. Every command that
// starts it takes it from here.
package self

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Path returns the path of the running commprof binary.
func Path() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the commprof binary: %w", err)
	}
	return exe, nil
}

// Run runs the binary with args, its standard output and error both to
// out, and waits for it. When ctx ends first, the child is interrupted
// (SIGINT, as Ctrl-C would) and waited for, so that it finishes what it
// recorded. A child that fails gives an error that ends with the last
// line it printed.
func Run(ctx context.Context, args []string, out io.Writer) error {
	exe, err := Path()
	if err != nil {
		return err
	}
	tail := &lastLine{w: out}
	c := exec.Command(exe, args...)
	c.Stdout, c.Stderr = tail, tail
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", exe, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = c.Process.Signal(os.Interrupt)
		err = <-done
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if l := tail.last(); l != "" {
			return fmt.Errorf("exit status %d: %s", ee.ExitCode(), l)
		}
		return fmt.Errorf("exit status %d", ee.ExitCode())
	}
	return err
}

// lastLine passes what is written on to w and keeps the last line that is
// not blank.
type lastLine struct {
	mu   sync.Mutex
	w    io.Writer
	line []byte // the line being written
	done string // the last complete line that is not blank
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.line = append(l.line, rest...)
			if len(l.line) > 4096 {
				l.line = l.line[len(l.line)-4096:]
			}
			break
		}
		l.line = append(l.line, rest[:i]...)
		if t := strings.TrimSpace(string(l.line)); t != "" {
			l.done = t
		}
		l.line, rest = l.line[:0], rest[i+1:]
	}
	return l.w.Write(p)
}

func (l *lastLine) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := strings.TrimSpace(string(l.line)); t != "" {
		return t
	}
	return l.done
}

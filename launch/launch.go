// Package launch starts the ranks of a job as local processes, the way
// mpirun does on one host: it hands each rank its rank, the world size, the
// coordinator and a per-job secret in COMMPROF_* variables, forwards every
// rank's output with a rank prefix, and when one rank fails it stops the
// others and reports which rank failed and why.
package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/internal/envnames"
)

// Spec describes a job to start.
type Spec struct {
	Ranks int
	Path  string   // the program every rank runs
	Args  []string // its arguments (without the program name)
	Env   []string // extra environment, added to this process's
	// Stdout receives rank 0's standard output as it is; Stderr receives
	// everything else, each line prefixed with "[rank N] ".
	Stdout, Stderr io.Writer
	// Grace is how long ranks get to exit after SIGTERM before SIGKILL
	// (default 5s).
	Grace time.Duration
	// Linger is how long the other ranks get, after one fails, to notice
	// it and exit with their own report before they are sent SIGTERM
	// (default 3s). Ranks see a dead peer at once, so this rarely elapses.
	Linger time.Duration
}

// RankError reports the first rank that failed.
type RankError struct {
	Rank     int
	ExitCode int            // -1 if killed by a signal
	Signal   syscall.Signal // the signal, if killed by one
	LastLine string         // the rank's last line on stderr
}

func (e *RankError) Error() string {
	var s string
	if e.ExitCode >= 0 {
		s = fmt.Sprintf("rank %d exited with status %d", e.Rank, e.ExitCode)
	} else {
		s = fmt.Sprintf("rank %d was killed by signal %d (%v)", e.Rank, int(e.Signal), e.Signal)
	}
	if e.LastLine != "" {
		s += ": " + e.LastLine
	}
	return s
}

type rank struct {
	n        int
	cmd      *exec.Cmd
	writers  []*os.File // this process's copies of the rank's output pipes
	mu       sync.Mutex
	lastLine string
	done     chan struct{}
	err      error
}

// Run starts the ranks and waits for them. It returns nil if every rank
// exited with status 0, a *RankError for the first rank that did not, or
// ctx's error if the job was interrupted (the ranks get SIGTERM first, so
// they can flush what they have).
func Run(ctx context.Context, s Spec) error {
	if s.Ranks < 1 {
		return fmt.Errorf("launch: %d ranks; want at least 1", s.Ranks)
	}
	if s.Grace <= 0 {
		s.Grace = 5 * time.Second
	}
	if s.Linger <= 0 {
		s.Linger = 3 * time.Second
	}
	// The ranks' parent-death signal is tied to the thread that starts
	// them (rankAttr): hold this one until they have all been reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("launch: opening the coordinator port: %w", err)
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return fmt.Errorf("launch: passing the coordinator port: %w", err)
	}
	defer lf.Close()
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	jobID := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(secret[:4])

	var out sync.Mutex // serialises lines from all ranks
	var pipes sync.WaitGroup
	ranks := make([]*rank, s.Ranks)
	for i := range ranks {
		cmd := exec.Command(s.Path, s.Args...)
		cmd.Env = append(os.Environ(), s.Env...)
		cmd.Env = append(cmd.Env,
			envnames.Rank+"="+strconv.Itoa(i),
			envnames.Size+"="+strconv.Itoa(s.Ranks),
			envnames.LocalRank+"="+strconv.Itoa(i),
			envnames.LocalSize+"="+strconv.Itoa(s.Ranks),
			envnames.Coord+"="+lnAddr(lf),
			envnames.Secret+"="+hex.EncodeToString(secret),
			envnames.JobID+"="+jobID,
		)
		if i == 0 {
			cmd.ExtraFiles = []*os.File{lf}
			cmd.Env = append(cmd.Env, envnames.CoordFD+"=3")
		}
		cmd.SysProcAttr = rankAttr()
		r := &rank{n: i, cmd: cmd, done: make(chan struct{})}
		ranks[i] = r
		// Pipes of our own rather than cmd.StdoutPipe: Wait closes those
		// as soon as the process exits, losing output not yet read.
		stdout, stdoutW, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("launch: rank %d: %w", i, err)
		}
		stderr, stderrW, err := os.Pipe()
		if err != nil {
			stdout.Close()
			stdoutW.Close()
			return fmt.Errorf("launch: rank %d: %w", i, err)
		}
		cmd.Stdout, cmd.Stderr = stdoutW, stderrW
		r.writers = []*os.File{stdoutW, stderrW}
		prefix := fmt.Sprintf("[rank %d] ", i)
		pipes.Add(2)
		go func() {
			defer pipes.Done()
			defer stdout.Close()
			if i == 0 {
				forward(stdout, s.Stdout, "", &out, nil)
			} else {
				forward(stdout, s.Stderr, prefix, &out, nil)
			}
		}()
		go func() {
			defer pipes.Done()
			defer stderr.Close()
			forward(stderr, s.Stderr, prefix, &out, r)
		}()
	}
	closeWriters := func(rs []*rank) {
		for _, r := range rs {
			for _, w := range r.writers {
				w.Close()
			}
		}
	}
	for i, r := range ranks {
		if err := r.cmd.Start(); err != nil {
			for _, q := range ranks[:i] {
				_ = q.cmd.Process.Kill()
				_ = q.cmd.Wait()
			}
			closeWriters(ranks)
			pipes.Wait()
			return fmt.Errorf("launch: starting rank %d (%s): %w", i, s.Path, err)
		}
	}
	closeWriters(ranks) // the ranks hold their own copies; EOF comes when they exit
	lf.Close()          // rank 0 has it now

	exited := make(chan *rank, len(ranks))
	for _, r := range ranks {
		go func() {
			r.err = r.cmd.Wait()
			close(r.done)
			exited <- r
		}()
	}
	// Failures before this launcher sent any signal, in the order reaped.
	var failures []*RankError
	interrupted, signalled := false, false
	var linger, term, kill <-chan time.Time
	for left := len(ranks); left > 0; {
		select {
		case r := <-exited:
			left--
			if r.err != nil && !interrupted && !signalled {
				failures = append(failures, rankError(r))
				if len(failures) == 1 {
					linger = time.After(s.Linger)
				}
			}
		case <-ctx.Done():
			ctx = context.Background() // once
			interrupted = true
			term = time.After(0)
		case <-linger:
			linger, term = nil, time.After(0)
		case <-term:
			term, signalled = nil, true
			for _, r := range ranks {
				signalRank(r, syscall.SIGTERM)
				signalRank(r, syscall.SIGCONT) // a stopped rank handles SIGTERM only once resumed
			}
			kill = time.After(s.Grace)
		case <-kill:
			kill = nil
			for _, r := range ranks {
				signalRank(r, syscall.SIGKILL)
			}
		}
	}
	pipes.Wait()
	switch {
	case interrupted:
		return fmt.Errorf("launch: %w: stopped %d ranks", context.Canceled, len(ranks))
	case len(failures) > 0:
		// Every line has been forwarded now.
		for _, f := range failures {
			r := ranks[f.Rank]
			r.mu.Lock()
			f.LastLine = r.lastLine
			r.mu.Unlock()
		}
		return culprit(failures)
	}
	return nil
}

// culprit picks the rank to blame among those that failed on their own.
// A rank killed by a signal is the likeliest cause: the others fail
// because it disappeared, and may be reaped before it. Otherwise the
// first rank reaped is blamed, unless its last line says that another
// rank that also failed failed first (collectives.BlamedRank): then that
// one, and so on down the chain.
func culprit(failures []*RankError) *RankError {
	for _, f := range failures {
		if f.ExitCode < 0 {
			return f
		}
	}
	byRank := map[int]*RankError{}
	for _, f := range failures {
		byRank[f.Rank] = f
	}
	c := failures[0]
	seen := map[int]bool{c.Rank: true}
	for {
		n := collectives.BlamedRank(c.LastLine, c.Rank)
		next := byRank[n]
		if n < 0 || next == nil || seen[n] {
			return c
		}
		seen[n] = true
		c = next
	}
}

func lnAddr(f *os.File) string {
	ln, err := net.FileListener(f)
	if err != nil {
		return ""
	}
	defer ln.Close()
	return ln.Addr().String()
}

func signalRank(r *rank, sig syscall.Signal) {
	select {
	case <-r.done:
	default:
		_ = r.cmd.Process.Signal(sig)
	}
}

func rankError(r *rank) *RankError {
	e := &RankError{Rank: r.n, ExitCode: -1}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		} else {
			e.ExitCode = ee.ExitCode()
		}
	}
	return e
}

// forward copies lines from src to dst with a prefix; if r is set it keeps
// the last line for the failure report.
func forward(src io.Reader, dst io.Writer, prefix string, mu *sync.Mutex, r *rank) {
	br := bufio.NewReaderSize(src, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line += "\n"
			}
			mu.Lock()
			_, _ = io.WriteString(dst, prefix+line)
			mu.Unlock()
			if r != nil {
				r.mu.Lock()
				r.lastLine = line[:len(line)-1]
				r.mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

package inject

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HelperArg is the first argument of a helper process: a program that
// takes part in injection (commprof) passes os.Args[2:] to RunHelper when
// it sees it in os.Args[1].
const HelperArg = "__inject-helper"

// Start starts the processes this rank's stalls and hogs need, running exe
// (the program's own binary) as helpers, and returns a function that
// stops them; call it when the rank ends. Stalls need the operating
// system to stop the process, which it cannot do to itself; hogs pin this
// process and theirs to one core. stalled, if not nil, is called (from a
// goroutine of Start's) once the rank runs again after each stop, with the
// stop's start and end on the host's monotonic clock (ns): the truth a
// report can be checked against.
func (p Plan) Start(exe string, stalled func(from, to int64)) (stop func(), err error) {
	var cmds []*exec.Cmd
	var readers sync.WaitGroup
	stop = func() {
		for _, c := range cmds {
			// A stall helper answers SIGTERM by letting the rank go on.
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
		readers.Wait()
		// If a helper died between stopping and continuing this rank,
		// nothing would wake it: it is running now, but make sure.
		_ = syscall.Kill(os.Getpid(), syscall.SIGCONT)
	}
	for _, f := range p.Faults {
		var args []string
		switch f.Kind {
		case Stall:
			args = []string{"stall", strconv.Itoa(os.Getpid()), f.Dur.String(), f.Period.String()}
		case Hog:
			cpu := p.Rank % runtime.NumCPU()
			if err := pinProcess(cpu); err != nil {
				stop()
				return nil, fmt.Errorf("injecting %s: pinning rank %d to core %d: %w", f, p.Rank, cpu, err)
			}
			args = []string{"hog", strconv.Itoa(f.Threads), strconv.Itoa(cpu)}
		default:
			continue
		}
		c := exec.Command(exe, append([]string{HelperArg}, args...)...)
		c.Stderr = os.Stderr
		var out io.ReadCloser
		if f.Kind == Stall {
			if out, err = c.StdoutPipe(); err != nil {
				stop()
				return nil, fmt.Errorf("injecting %s: %w", f, err)
			}
		} else {
			c.Stdout = os.Stderr
		}
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("injecting %s: starting its helper: %w", f, err)
		}
		cmds = append(cmds, c)
		if out != nil {
			readers.Add(1)
			go func() {
				defer readers.Done()
				readStops(out, stalled)
			}()
		}
	}
	return stop, nil
}

// readStops reads a stall helper's report of its stops, one "FROM TO"
// line (monotonic ns) per stop, until the helper ends.
func readStops(r io.Reader, stalled func(from, to int64)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var from, to int64
		if _, err := fmt.Sscan(sc.Text(), &from, &to); err == nil && stalled != nil && to > from {
			stalled(from, to)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// RunHelper runs a helper process: "stall PID DUR PERIOD" stops process
// PID for DUR every PERIOD until it is gone or the helper is told to end;
// "hog THREADS CPU" spins THREADS threads on core CPU until it is told to
// end. It returns when ctx ends (the caller cancels it on SIGTERM/SIGINT).
func RunHelper(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("inject helper: no task")
	}
	switch {
	case args[0] == "stall" && len(args) == 4:
		pid, err1 := strconv.Atoi(args[1])
		dur, err2 := time.ParseDuration(args[2])
		period, err3 := time.ParseDuration(args[3])
		if err := errors.Join(err1, err2, err3); err != nil || pid <= 0 || dur <= 0 || dur >= period {
			return fmt.Errorf("inject helper: bad stall %v", args[1:])
		}
		return stall(ctx, pid, dur, period)
	case args[0] == "hog" && len(args) == 3:
		threads, err1 := strconv.Atoi(args[1])
		cpu, err2 := strconv.Atoi(args[2])
		if err := errors.Join(err1, err2); err != nil || threads < 1 || cpu < 0 {
			return fmt.Errorf("inject helper: bad hog %v", args[1:])
		}
		return hog(ctx, threads, cpu)
	}
	return fmt.Errorf("inject helper: unknown task %v", args)
}

// stall stops and continues pid on schedule, and reports each stop on
// standard output as "FROM TO" in monotonic ns. Whatever ends it, the
// process is left running.
func stall(ctx context.Context, pid int, dur, period time.Duration) error {
	defer syscall.Kill(pid, syscall.SIGCONT)
	next := time.Now().Add(period - dur)
	for {
		if err := sleepUntil(ctx, next); err != nil {
			return nil
		}
		from := monotonic()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil // the rank is gone
		}
		err := sleepUntil(ctx, next.Add(dur))
		// Read each end of the stop next to the signal that makes it:
		// a helper descheduled after a signal would otherwise stretch
		// what it reports.
		to := monotonic()
		kerr := syscall.Kill(pid, syscall.SIGCONT)
		if kerr == nil {
			fmt.Fprintf(os.Stdout, "%d %d\n", from, to)
		}
		if kerr != nil || err != nil {
			return nil
		}
		next = next.Add(period)
	}
}

// hog spins threads on one core until ctx ends.
func hog(ctx context.Context, threads, cpu int) error {
	runtime.GOMAXPROCS(threads + 1)
	if err := pinProcess(cpu); err != nil {
		return fmt.Errorf("inject helper: pinning to core %d: %w", cpu, err)
	}
	var stop atomic.Bool
	for range threads {
		go func() {
			runtime.LockOSThread()
			x := 0
			for !stop.Load() {
				for i := range 1 << 16 {
					x += i
				}
			}
			_ = x
		}()
	}
	<-ctx.Done()
	stop.Store(true)
	return nil
}

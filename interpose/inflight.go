package interpose

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/commprof/commprof/trace"
)

// InFlight is the rank's in-flight file (trace/inflight.go has its
// layout): mapped into memory and rewritten at each collective call's
// entry and return, so that record and doctor see the call a stuck rank
// is in without its help. A call costs a copy of 512 bytes into the
// mapping, no system call. Safe for concurrent use; nil is a valid
// InFlight that keeps nothing.
type InFlight struct {
	mu      sync.Mutex
	mem     []byte
	gen     uint64
	f       trace.InFlight
	scratch [trace.InFlightSize]byte
}

// OpenInFlight makes rank's in-flight file in run directory dir.
func OpenInFlight(dir string, rank, world int, host string) (*InFlight, error) {
	path := trace.InFlightFile(dir, rank)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("in-flight state: %w", err)
	}
	fd, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("in-flight state: %w", err)
	}
	defer fd.Close()
	if err := fd.Truncate(trace.InFlightSize); err != nil {
		return nil, fmt.Errorf("in-flight state: %w", err)
	}
	mem, err := syscall.Mmap(int(fd.Fd()), 0, trace.InFlightSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("in-flight state: mapping %s: %w", path, err)
	}
	x := &InFlight{mem: mem}
	x.f = trace.InFlight{Rank: rank, World: world, PID: os.Getpid(), Host: host, State: trace.InFlightComputing,
		Seq: -1, Root: -1, Peer: -1, Exit: time.Now()}
	x.write()
	return x, nil
}

// write publishes x.f: the counter is odd while the bytes change.
func (x *InFlight) write() {
	gen := (*uint64)(unsafe.Pointer(&x.mem[32]))
	x.gen++
	atomic.StoreUint64(gen, x.gen)
	x.gen++
	trace.EncodeInFlight(x.scratch[:], &x.f, x.gen)
	copy(x.mem[:32], x.scratch[:32])
	copy(x.mem[40:], x.scratch[40:])
	atomic.StoreUint64(gen, x.gen)
}

// Enter shows a collective call as entered at now (trace time).
func (x *InFlight) Enter(op, comm string, members []int, seq, bytes int64, dtype string, root int, now int64) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	f := &x.f
	f.State, f.Kind, f.Op, f.Seq, f.Bytes, f.DType, f.Root, f.Peer = trace.InFlightBlocked, trace.InFlightCollective, op, seq, bytes, dtype, root, -1
	if f.Comm != comm || len(f.Members) != len(members) {
		f.Comm, f.CommSize, f.Members = comm, len(members), members
	}
	f.EntryNS, f.Entry, f.Error = now, time.Now(), 0
	x.write()
}

// Exit shows the call entered last as returned at now, failed when err is
// not nil; a call the job's end interrupted stays entered.
func (x *InFlight) Exit(now int64, err error) {
	if x == nil {
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return // the job ends while the rank waits in the call: it stays in it
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.f.State = trace.InFlightComputing
	x.f.Completed++
	x.f.ExitNS, x.f.Exit = now, time.Now()
	x.f.Error = 0
	if err != nil {
		x.f.Error = 1
	}
	f := &x.f
	f.Recent = append(f.Recent, trace.InFlightCall{Op: f.Op, Comm: f.Comm, DType: f.DType, RedOp: f.RedOp, Seq: f.Seq,
		Bytes: f.Bytes, Root: f.Root, Error: f.Error})
	if len(f.Recent) > trace.InFlightRecent {
		f.Recent = append(f.Recent[:0], f.Recent[1:]...)
	}
	x.write()
}

// SetState sets the rank's state (finalizing at its end, finished once
// its recording is closed).
func (x *InFlight) SetState(s trace.InFlightState, now int64) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.f.State = s
	if s == trace.InFlightFinalizing {
		x.f.EntryNS, x.f.Entry = now, time.Now()
	}
	x.write()
}

// Close unmaps the file; it stays in the run directory.
func (x *InFlight) Close() error {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	mem := x.mem
	x.mem = nil
	if mem == nil {
		return nil
	}
	return syscall.Munmap(mem)
}

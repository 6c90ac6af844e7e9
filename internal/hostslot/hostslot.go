// Package hostslot bounds how many processes of one machine do a thing at
// once: the ranks of a job that all finish together and would otherwise
// all compact their trace streams at the same moment (each compaction
// holds some 40 MB; 512 ranks on one machine would hold 20 GB).
//
// A slot is an abstract Unix socket bound under a name: the kernel lets
// one socket hold a name, and frees it when the socket is closed or its
// process dies, so a killed holder never keeps a slot and nothing is left
// on disk. Abstract sockets belong to a network namespace, so processes in
// separate namespaces (ranks standing for separate hosts) do not share
// slots.
package hostslot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"time"
)

// retry is how long a process waits before trying again when it could
// neither take a slot nor queue on one (a holder let go in between).
const retry = 5 * time.Millisecond

// Acquire takes one of n slots named name on this machine, waiting until
// one is free or ctx ends. It returns the function that gives the slot
// back. The first slot tried is start's (a rank number spreads the
// processes over the slots). Where slots cannot be made (not Linux, no
// Unix sockets) it does not wait: the bound is a courtesy, not a lock.
//
// A waiter does not poll: it connects to the slot start's holder, which
// never accepts, and sleeps in a read until the holder's socket closes
// and takes its queued connection with it; then every waiter of that
// slot tries the slots again.
func Acquire(ctx context.Context, name string, n, start int) (release func(), err error) {
	if n < 1 {
		n = 1
	}
	if runtime.GOOS != "linux" {
		return func() {}, nil
	}
	start %= n
	if start < 0 {
		start += n
	}
	addr := func(slot int) *net.UnixAddr {
		return &net.UnixAddr{Name: fmt.Sprintf("@%s-%d", name, slot), Net: "unix"}
	}
	for {
		for i := range n {
			ln, err := net.ListenUnix("unix", addr((start+i)%n))
			if err == nil {
				return func() { ln.Close() }, nil
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				return func() {}, nil
			}
		}
		if err := waitOn(ctx, addr(start)); err != nil {
			return nil, err
		}
	}
}

// waitOn sleeps until the socket at addr closes, or ctx ends (its error).
func waitOn(ctx context.Context, addr *net.UnixAddr) error {
	c, err := net.DialUnix("unix", nil, addr)
	if err != nil {
		// Its holder let go in between, or its queue is full.
		t := time.NewTimer(retry)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var b [1]byte
	_, _ = c.Read(b[:]) // returns when the holder's socket is closed
	return ctx.Err()
}

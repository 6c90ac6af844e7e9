package launch

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func sh(t *testing.T, ranks int, script string, linger time.Duration) (string, string, time.Duration, error) {
	t.Helper()
	var out, errOut syncBuffer
	start := time.Now()
	err := Run(context.Background(), Spec{Ranks: ranks, Path: "/bin/sh", Args: []string{"-c", script},
		Stdout: &out, Stderr: &errOut, Linger: linger, Grace: time.Second})
	return out.String(), errOut.String(), time.Since(start), err
}

func TestOutputIsPrefixed(t *testing.T) {
	out, errOut, _, err := sh(t, 3, `echo "out $COMMPROF_RANK of $COMMPROF_SIZE"; echo "err $COMMPROF_RANK" >&2`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out != "out 0 of 3\n" {
		t.Errorf("rank 0's stdout passed through as %q", out)
	}
	for _, want := range []string{"[rank 1] out 1 of 3\n", "[rank 2] out 2 of 3\n", "[rank 0] err 0\n", "[rank 2] err 2\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
}

func TestFailingRankStopsTheOthers(t *testing.T) {
	_, _, took, err := sh(t, 3, `if [ "$COMMPROF_RANK" = 1 ]; then echo "out of cheese" >&2; exit 3; fi; exec sleep 60`, 200*time.Millisecond)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || re.ExitCode != 3 || re.LastLine != "out of cheese" {
		t.Fatalf("got %v", err)
	}
	if took > 20*time.Second {
		t.Fatalf("the other ranks ran on for %v", took)
	}
	if got := re.Error(); got != "rank 1 exited with status 3: out of cheese" {
		t.Errorf("message %q", got)
	}
}

// A rank killed by a signal is blamed even when another rank, failing
// because of it, is reaped first.
func TestCulpritIsTheKilledRank(t *testing.T) {
	got := culprit([]*RankError{{Rank: 0, ExitCode: 1}, {Rank: 2, ExitCode: -1, Signal: syscall.SIGKILL}})
	if got.Rank != 2 {
		t.Fatalf("blamed rank %d", got.Rank)
	}
	if got.Error() != "rank 2 was killed by signal 9 (killed)" {
		t.Errorf("message %q", got.Error())
	}
	if culprit([]*RankError{{Rank: 3, ExitCode: 1}, {Rank: 1, ExitCode: 2}}).Rank != 3 {
		t.Error("without a signal the first failure is the culprit")
	}
}

func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Spec{Ranks: 2, Path: "/bin/sh", Args: []string{"-c", `trap 'echo bye >&2; exit 0' TERM; echo up; while :; do sleep 0.05; done`},
			Stdout: &out, Stderr: &out, Grace: 5 * time.Second})
	}()
	for strings.Count(out.String(), "up") < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ranks not stopped")
	}
	if strings.Count(out.String(), "bye") != 2 {
		t.Errorf("ranks did not get SIGTERM to finish cleanly: %q", out.String())
	}
}

func TestBadSpec(t *testing.T) {
	if err := Run(context.Background(), Spec{Ranks: 0, Path: "/bin/true"}); err == nil {
		t.Error("0 ranks accepted")
	}
	err := Run(context.Background(), Spec{Ranks: 2, Path: "/nonexistent/commprof", Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "starting rank 0") {
		t.Errorf("missing program: %v", err)
	}
}

// TestNoOutputLost: a rank that writes and exits at once must have all of
// its output forwarded (reading must finish before the pipe is dropped).
func TestNoOutputLost(t *testing.T) {
	for range 5 {
		out, errOut, _, err := sh(t, 3, `i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i+1)); done`, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, "\n"); n != 300 {
			t.Fatalf("rank 0: %d of 300 lines forwarded", n)
		}
		if n := strings.Count(errOut, "] line "); n != 600 {
			t.Fatalf("ranks 1 and 2: %d of 600 lines forwarded", n)
		}
	}
}

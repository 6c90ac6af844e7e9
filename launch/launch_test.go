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

// A rank that failed because another failed says so; the blame goes down
// the chain to a rank that failed on its own, among those that failed.
func TestCulpritFollowsTheRanksThatFailedFirst(t *testing.T) {
	const (
		own     = "commprof: rank 3: allreduce of 8 bytes: collective mismatch in broadcast #3: rank 2 called allreduce"
		aborted = ": allreduce #3: rank 3 failed: aborted: allreduce of 8 bytes: collective mismatch in broadcast #3: rank 2 called allreduce (reported by rank 0)"
	)
	for _, tc := range []struct {
		name     string
		failures []*RankError
		want     int
	}{
		{"one step", []*RankError{{Rank: 1, ExitCode: 1, LastLine: "commprof: rank 1" + aborted}, {Rank: 3, ExitCode: 1, LastLine: own}}, 3},
		{"two steps", []*RankError{
			{Rank: 0, ExitCode: 1, LastLine: "commprof: rank 0: barrier #9: rank 5 failed: aborted: rank 7 failed: connection closed"},
			{Rank: 5, ExitCode: 1, LastLine: "commprof: rank 5: rank 7 failed: connection closed"},
			{Rank: 7, ExitCode: 2, LastLine: "commprof: rank 7: writing the trace: no space left on device"}}, 7},
		{"the deepest cause in one line", []*RankError{
			{Rank: 0, ExitCode: 1, LastLine: "commprof: rank 0: rank 5 failed: aborted: rank 7 failed: connection closed"},
			{Rank: 7, ExitCode: 2, LastLine: "commprof: rank 7: no space left on device"}}, 7},
		{"blamed rank did not fail on its own", []*RankError{{Rank: 1, ExitCode: 1, LastLine: "commprof: rank 1: rank 4 failed: no data or heartbeat for 15s"}, {Rank: 2, ExitCode: 1}}, 1},
		{"its own name", []*RankError{{Rank: 2, ExitCode: 1, LastLine: "commprof: rank 2: rank 2 failed: interrupted in the middle of a message to rank 0"}, {Rank: 0, ExitCode: 1}}, 2},
		{"a loop", []*RankError{{Rank: 1, ExitCode: 1, LastLine: "rank 2 failed: x"}, {Rank: 2, ExitCode: 1, LastLine: "rank 1 failed: y"}}, 2},
		{"a peer that gave up joining", []*RankError{
			{Rank: 9, ExitCode: 1, LastLine: "commprof: rank 9: joining: rank 9: connecting to rank 4 at 127.0.0.1:40123 (host n1): dial tcp 127.0.0.1:40123: connect: connection refused"},
			{Rank: 4, ExitCode: 1, LastLine: "commprof: rank 4: setting up shared memory: context deadline exceeded"}}, 4},
		{"a peer that left while joining", []*RankError{
			{Rank: 9, ExitCode: 1, LastLine: "commprof: rank 9: rank 4 at 10.0.0.2:40123 (host n2) dropped the connection while it was being set up (did it exit?): EOF"},
			{Rank: 4, ExitCode: 1, LastLine: "commprof: rank 4: out of memory"}}, 4},
		{"shared memory's Unix socket", []*RankError{
			{Rank: 2, ExitCode: 1, LastLine: "commprof: rank 2: setting up shared memory: connecting to rank 1's Unix socket: connection refused"},
			{Rank: 1, ExitCode: 1, LastLine: "commprof: rank 1: killed by its own hand"}}, 1},
		{"not commprof's words", []*RankError{{Rank: 4, ExitCode: 1, LastLine: "RuntimeError: Connection closed by peer [10.0.0.2]:4012"}, {Rank: 0, ExitCode: 1}}, 4},
	} {
		if got := culprit(tc.failures); got.Rank != tc.want {
			t.Errorf("%s: blamed rank %d, want %d", tc.name, got.Rank, tc.want)
		}
	}
}

// The launcher blames the rank whose failure the first rank reaped
// reported, with that rank's own last line.
func TestRunBlamesTheCauseNotTheFirstReaped(t *testing.T) {
	script := `case "$COMMPROF_RANK" in
0) echo "commprof: rank 0: allreduce #4: rank 2 failed: connection closed" >&2; exit 1;;
2) sleep 0.3; echo "commprof: rank 2: out of cheese" >&2; exit 3;;
esac`
	_, _, _, err := sh(t, 3, script, 30*time.Second)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 2 || re.ExitCode != 3 || re.LastLine != "commprof: rank 2: out of cheese" {
		t.Fatalf("got %v, want rank 2's own failure", err)
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

package inject

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procState returns the state letter of process pid (R, S, T, ...).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// TestStallStopsAndReleases stalls a child process and watches its state:
// stopped during a stall, and running (sleeping) once the helper ends,
// whenever it is told to end.
func TestStallStopsAndReleases(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	pid := child.Process.Pid
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunHelper(ctx, []string{"stall", strconv.Itoa(pid), "400ms", "450ms"}) }()
	// The first stall runs from 50 ms to 450 ms after the start.
	stopped := false
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !stopped; time.Sleep(5 * time.Millisecond) {
		stopped = procState(t, pid) == "T"
	}
	if !stopped {
		t.Fatal("the stalled process was never seen stopped")
	}
	cancel() // in the middle of a stall, most likely
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := procState(t, pid); s == "T" {
		t.Fatalf("the process is left stopped (state %s) after the helper ended", s)
	}
	if err := RunHelper(context.Background(), []string{"stall", "1", "2s", "1s"}); err == nil {
		t.Error("a stall longer than its period was accepted")
	}
}

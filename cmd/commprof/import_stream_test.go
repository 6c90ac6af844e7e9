package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/trace"
)

// ncclLogOf writes an NCCL log of two processes making calls allreduces
// each (one event per call and process when imported).
func ncclLogOf(calls int) []byte {
	var b bytes.Buffer
	for r := range 2 {
		fmt.Fprintf(&b, "node1:%d:%d [%d] NCCL INFO ncclCommInitRank comm 0x%d000 rank %d nranks 2 cudaDev %d nvmlDev %d busId 1000 commId 0xaaa - Init COMPLETE\n",
			100*(r+1), 100*(r+1), r, r+1, r, r, r)
	}
	for i := range calls {
		for r := range 2 {
			fmt.Fprintf(&b, "node1:%d:%d [%d] NCCL INFO AllReduce: opCount %x sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x%d000 [nranks=2] stream 0x5000\n",
				100*(r+1), 100*(r+1), r, i, r+1)
		}
	}
	return b.Bytes()
}

// importedEvents returns the events of a run and its manifest.
func importedEvents(t *testing.T, dir string) (int, *trace.Manifest) {
	t.Helper()
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return run.NumEvents(), run.Manifest
}

// TestImportStreams reads an input through a pipe (standard input), a
// process substitution and a FIFO: each is read once, and gives the
// events the same file gives.
func TestImportStreams(t *testing.T) {
	const calls = 2000
	dir := t.TempDir()
	log := filepath.Join(dir, "nccl.log")
	if err := os.WriteFile(log, ncclLogOf(calls), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, stdin []byte, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = cleanEnv()
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin) // a pipe
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	check := func(t *testing.T, out string) {
		t.Helper()
		n, m := importedEvents(t, out)
		if n != 2*calls || m.Status != trace.StatusComplete || len(m.Ranks) != 2 {
			t.Errorf("%d events, status %s, %d ranks; want %d, complete, 2", n, m.Status, len(m.Ranks), 2*calls)
		}
	}
	t.Run("pipe", func(t *testing.T) {
		data, _ := os.ReadFile(log)
		out := filepath.Join(t.TempDir(), "run")
		run(t, data, bin, "import", "--out", out, "/dev/stdin")
		check(t, out)
	})
	t.Run("process-substitution", func(t *testing.T) {
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash")
		}
		out := filepath.Join(t.TempDir(), "run")
		run(t, nil, bash, "-c", fmt.Sprintf("exec %q import --out %q <(cat %q)", bin, out, log))
		check(t, out)
	})
	t.Run("fifo", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		data, _ := os.ReadFile(log)
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			f.Write(data)
			f.Close()
		}()
		out := filepath.Join(t.TempDir(), "run")
		run(t, nil, bin, "import", "--out", out, fifo)
		check(t, out)
	})
}

// importExit waits for cmd to exit within limit, killing it and failing
// t when it does not; it returns the exit status.
func importExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the import did not stop within %v of the signal", limit)
	}
	return 0
}

// pollUntil polls cond until it holds, failing t after limit.
func pollUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestImportSignals stops imports blocked on a FIFO: one that never gets
// a writer (blocked in open), and one whose writer wrote part of a log and
// holds it open (blocked in read). Each stops at once on the signal, the
// second leaving an interrupted run of what it read.
func TestImportSignals(t *testing.T) {
	t.Run("no-writer-SIGINT", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		out := filepath.Join(t.TempDir(), "run")
		cmd := exec.Command(bin, "import", "--out", out, fifo)
		cmd.Env = cleanEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The import waits in the kernel for a writer to open the FIFO.
		pollUntil(t, 30*time.Second, "the import's open of the FIFO", func() bool {
			tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", cmd.Process.Pid))
			for _, w := range tasks {
				if b, _ := os.ReadFile(w); string(b) == "wait_for_partner" {
					return true
				}
			}
			return false
		})
		cmd.Process.Signal(os.Interrupt)
		if code := importExit(t, cmd, 10*time.Second); code != exitInterrupted {
			t.Errorf("exit %d, want %d\n%s", code, exitInterrupted, stderr.String())
		}
		if !strings.Contains(stderr.String(), "interrupted while waiting for a writer to open the FIFO") {
			t.Errorf("stderr:\n%s", stderr.String())
		}
	})
	t.Run("blocked-read-SIGTERM", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		const calls = 20000
		data := ncclLogOf(calls)
		out := filepath.Join(t.TempDir(), "run")
		cmd := exec.Command(bin, "import", "--out", out, fifo)
		cmd.Env = cleanEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// Half the log, whole lines; the writer's write returns once the
		// import has taken all but a pipe's buffer of it.
		half := data[:bytes.IndexByte(data[len(data)/2:], '\n')+len(data)/2+1]
		if _, err := w.Write(half); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if code := importExit(t, cmd, 10*time.Second); code != exitInterrupted {
			t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr.String())
		}
		n, m := importedEvents(t, out)
		if m.Status != trace.StatusInterrupted || n == 0 || n >= 2*calls {
			t.Errorf("status %s with %d events; want interrupted with some of the %d", m.Status, n, 2*calls)
		}
	})
}

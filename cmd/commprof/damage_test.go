package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/damage"
)

// TestDamagedRuns puts every reading command through a corpus of damaged
// run directories (internal/damage: cut and corrupted streams, values a
// run cannot hold, broken or hostile run.json files, FIFOs and stray
// files) under a memory limit and a time limit: each must end by itself
// with a clear error (exit 1) or a result (exit 0), never a panic, a
// hang or an out-of-memory death.
func TestDamagedRuns(t *testing.T) {
	base := t.TempDir()
	cases, err := damage.Corpus(filepath.Join(base, "corpus"), 1)
	if err != nil {
		t.Fatal(err)
	}
	good := cases[0].Dir
	const memLimitKB = 4 << 20 // address space, KiB: 4 GiB
	cmds := [][]string{
		{"stats", "{}"},
		{"stats", "{}", "--format", "json"},
		{"report", "{}", "-o", "{out}.html"},
		{"dump", "{}", "--limit", "50"},
		{"export", "{}", "--format", "perfetto", "-o", "{out}.json"},
		{"export", "{}", "--format", "pprof", "-o", "{out}.pb.gz"},
		{"export", "{}", "--format", "csv", "-o", "{out}.csv"},
		{"diff", good, "{}"},
		{"predict", "{}", "--ranks", "8"},
		{"bench", "read", "{}", "--repeat", "1"},
	}
	worst := int64(0)
	for i, c := range cases {
		for j, cmd := range cmds {
			args := make([]string, len(cmd))
			for k, a := range cmd {
				a = strings.ReplaceAll(a, "{}", c.Dir)
				args[k] = strings.ReplaceAll(a, "{out}", filepath.Join(base, "out-"+strconv.Itoa(i)+"-"+strconv.Itoa(j)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			sh := exec.CommandContext(ctx, "sh", "-c", `ulimit -v `+strconv.Itoa(memLimitKB)+` && exec "$@"`, "sh", bin)
			sh.Args = append(sh.Args, args...)
			sh.Env = cleanEnv()
			var stderr bytes.Buffer
			sh.Stderr = &stderr
			err := sh.Run()
			timedOut := ctx.Err() != nil
			cancel()
			code := sh.ProcessState.ExitCode()
			if timedOut {
				t.Errorf("%s: commprof %s did not end in 30 s", c.Name, strings.Join(cmd, " "))
				continue
			}
			if ru, ok := sh.ProcessState.SysUsage().(*syscall.Rusage); ok {
				worst = max(worst, ru.Maxrss)
			}
			msg := stderr.String()
			if code > 1 || strings.Contains(msg, "panic") || strings.Contains(msg, "fatal error") || strings.Contains(msg, "goroutine ") {
				t.Errorf("%s: commprof %s: exit %d (%v)\n%s", c.Name, strings.Join(cmd, " "), code, err, msg)
			}
			if code == 1 && !strings.HasPrefix(msg, "commprof: ") {
				t.Errorf("%s: commprof %s failed without saying why:\n%s", c.Name, strings.Join(cmd, " "), msg)
			}
		}
	}
	t.Logf("%d damaged runs × %d commands; the largest peak RSS was %d KiB", len(cases), len(cmds), worst)
	if worst > 1<<20 {
		t.Errorf("a command used %d KiB on a damaged run of a few KiB", worst)
	}
}

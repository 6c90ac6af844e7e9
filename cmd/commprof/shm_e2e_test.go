package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// TestAutoTransportInAJob: a job of 4 local ranks with no
// COMMPROF_TRANSPORT (auto) links them through shared memory, and bench's
// header says so; with COMMPROF_TRANSPORT=tcp it links them through TCP,
// and says that.
func TestAutoTransportInAJob(t *testing.T) {
	for _, tc := range []struct {
		env       []string
		want, not string
	}{
		{nil, "# rank 0's links: 3 peers through shared memory (", "TCP"},
		{[]string{envnames.Transport + "=tcp"}, "# rank 0's links: 3 peers through TCP (congestion control reno, raw I/O ", "shared memory"},
		{[]string{envnames.Transport + "=shm"}, "# rank 0's links: 3 peers through shared memory (", "TCP"},
	} {
		r := commprof(t, tc.env, "bench", "allreduce", "--ranks", "4", "--max", "64K", "--factor", "8", "--iters", "2")
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) || strings.Contains(header(r.stdout), tc.not) {
			t.Errorf("%v: exit %d, want %q (and no %q) in the header:\n%s%s", tc.env, r.code, tc.want, tc.not, r.stdout, r.stderr)
			continue
		}
		if strings.Contains(r.stderr, "warning") {
			t.Errorf("%v: a warning:\n%s", tc.env, r.stderr)
		}
		checkTable(t, r.stdout, 5) // 8 to 32K by 8
	}
}

// header is the comment lines a bench table starts with.
func header(out string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestUnknownMachine: where /proc does not show the kernel's boot id (a
// sandbox; here a mount namespace with an empty tmpfs over
// /proc/sys/kernel/random), a rank cannot tell which ranks share its
// machine. With the default transport the job runs over TCP, every rank
// warns saying why, and bench's header says it too; with
// COMMPROF_TRANSPORT=shm the job fails saying why.
func TestUnknownMachine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting over /proc needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed")
	}
	hide := []string{"unshare", "--mount", "sh", "-c", `mount -t tmpfs none /proc/sys/kernel/random && exec "$@"`, "sh"}
	args := []string{"bench", "allreduce", "--ranks", "4", "--max", "64K", "--factor", "8", "--iters", "2"}
	why := "this rank cannot tell which ranks share its machine"
	boot := "reading the kernel's boot id: open /proc/sys/kernel/random/boot_id"

	r := commprofWrapped(t, hide, nil, args...)
	if r.code != 0 {
		t.Fatalf("auto: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkTable(t, r.stdout, 5)
	if h := header(r.stdout); !strings.Contains(h, "# rank 0's links: 3 peers through TCP (") || !strings.Contains(h, "not through shared memory: "+why) || !strings.Contains(h, boot) {
		t.Errorf("auto: the header does not say that the ranks use TCP, and why:\n%s", h)
	}
	for rank := range 4 {
		want := fmt.Sprintf("[rank %d] commprof: warning: rank %d: TCP instead of shared memory: %s", rank, rank, why)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("auto: no warning %q in\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, boot) {
		t.Errorf("auto: the warnings do not say what could not be read:\n%s", r.stderr)
	}

	r = commprofWrapped(t, hide, []string{envnames.Transport + "=shm"}, args...)
	if want := envnames.Transport + "=shm: " + why; r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, boot) {
		t.Errorf("shm: exit %d, want a failure saying %q and %q:\n%s%s", r.code, want, boot, r.stdout, r.stderr)
	}
}

// commprofWrapped runs the binary as commprof does, under wrap, a command
// that runs the rest of its arguments.
func commprofWrapped(t *testing.T, wrap, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append(append(append([]string(nil), wrap...), bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", argv, err)
	}
	return result{stdout: o.String(), stderr: e.String(), code: code}
}

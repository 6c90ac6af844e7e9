package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

func TestRecordTrain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--ranks", "2", "--out", dir, "--", "train", "--synthetic-size", "1200", "--hidden", "32",
		"--epochs", "2", "--batch-size", "16", "--bucket-mb", "0.01")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "global batch 32") || !strings.Contains(r.stdout, "epoch 2 ") {
		t.Errorf("output:\n%s", r.stdout)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := run.Manifest
	if m.Status != trace.StatusComplete || m.Config["program"] != "train" || m.Metrics["test_accuracy"] < 0.9 {
		t.Fatalf("manifest %+v", m)
	}
	for _, rk := range run.Ranks {
		kinds := map[trace.Kind]int{}
		steps, marks := map[int32]bool{}, 0
		for _, e := range rk.Events {
			kinds[e.Kind]++
			if e.Kind == trace.KindStep {
				steps[e.Step] = true
			}
			if e.Kind == trace.KindMark && e.Name == "test_accuracy" {
				marks++
			}
		}
		// 1200 images / global batch 32 = 37 steps per epoch, 2 epochs.
		if len(steps) != 74 || marks != 2 || kinds[trace.KindCompute] < 74*5 || kinds[trace.KindCollective] < 74 {
			t.Errorf("rank %d: %d steps, %d accuracy marks, kinds %v", rk.Info.Rank, len(steps), marks, kinds)
		}
	}
	checkMessages(t, run)
}

func TestTrainBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"train", "--ranks", "2", "--data", "/nonexistent"}, exitError, "train-images-idx3-ubyte"},
		{[]string{"train", "--ranks", "2", "--synthetic-size", "200", "--batch-size", "150"}, exitError, "larger than the 200 training images"},
		{[]string{"train", "--hidden", "12,x"}, exitUsage, "--hidden"},
		{[]string{"train", "--lr-scaling", "cubic"}, exitUsage, "learning-rate scaling"},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code == 0 || (tc.code == exitUsage && r.code != exitUsage) || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestRecordParameterServer: with one server, every gradient push goes to
// rank 0 and every parameter pull comes from it.
func TestRecordParameterServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--ranks", "3", "--out", dir, "--", "train", "--synthetic-size", "600", "--hidden", "16",
		"--epochs", "1", "--batch-size", "16", "--sync", "ps", "--servers", "1")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	pushes := 0
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindSend && e.Name == "sendrecv" && e.Seq%2 == 0 {
				pushes++
				if e.Peer != 0 {
					t.Fatalf("rank %d pushed a gradient to rank %d", e.Rank, e.Peer)
				}
			}
		}
	}
	// 600/48 = 12 steps, 3 ranks pushing each step.
	if pushes != 12*3 {
		t.Errorf("%d gradient pushes, want 36", pushes)
	}
	if run.Manifest.Config["sync"] != "ps" || run.Manifest.Metrics["test_accuracy"] <= 0 {
		t.Errorf("manifest %+v", run.Manifest)
	}
	// The analyzer sees the parameter server's traffic as a star.
	s := statsJSON(t, dir)
	found := false
	for _, p := range s.Patterns {
		if p.Op == "sendrecv" {
			found = true
			if p.Pattern != analyze.PatternStar || p.Ranks != 3 {
				t.Errorf("point-to-point pattern %+v, want a star over 3 ranks", p)
			}
		}
	}
	if !found || s.StepSummary.Steps != 12 {
		t.Errorf("patterns %+v, %d steps", s.Patterns, s.StepSummary.Steps)
	}
}

// TestFashionMNIST trains on real data: Debian's Fashion-MNIST, which
// `make test` installs.
func TestFashionMNIST(t *testing.T) {
	const dir = "/usr/share/datasets/fashion-mnist"
	if _, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte.gz")); err != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("Fashion-MNIST not installed; `make test` installs dataset-fashion-mnist")
		}
		t.Skip("dataset-fashion-mnist not installed")
	}
	r := commprof(t, nil, "train", "--ranks", "2", "--data", dir, "--epochs", "2", "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var acc float64
	for _, line := range strings.Split(r.stdout, "\n") {
		// epoch N  loss X  train acc X  test acc X ...
		if f := strings.Fields(line); len(f) > 9 && f[0] == "epoch" && f[7] == "test" {
			acc, _ = strconv.ParseFloat(f[9], 64)
		}
	}
	// 86-87% after 5 epochs (docs/benchmarks.md); 2 epochs reach 85-86%.
	if acc < 0.84 {
		t.Fatalf("test accuracy %.4f after 2 epochs, want at least 0.84\n%s", acc, r.stdout)
	}
	t.Logf("Fashion-MNIST test accuracy after 2 epochs on 2 ranks: %.4f", acc)
}

// TestProgressOnlyOnATerminal: the trainer's progress bar is shown when
// record's stderr is a terminal (here a pseudo-terminal of script(1)),
// and never in output that goes to a pipe, where it would stay.
func TestProgressOnlyOnATerminal(t *testing.T) {
	args := []string{"record", "--ranks", "2", "--out", "", "--", "train", "--synthetic-size", "600", "--hidden", "16", "--epochs", "1"}
	const bar = "epoch 1/1 [#"
	args[4] = filepath.Join(t.TempDir(), "piped")
	r := commprof(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "epoch 1 ") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, bar) || strings.Contains(r.stdout, bar) {
		t.Errorf("a progress bar in output that goes to a pipe:\n%s", r.stderr)
	}

	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give record a terminal")
	}
	args[4] = filepath.Join(t.TempDir(), "tty")
	line := bin
	for _, a := range args {
		line += " " + a
	}
	cmd := exec.Command(script, "-qec", line, "/dev/null")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record under script: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), bar) {
		t.Errorf("no progress bar on a terminal:\n%s", out)
	}
}

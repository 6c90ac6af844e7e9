package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// checkMessages checks that every send recorded in the run was received
// exactly once, by the peer it names: for the collectives both ranks
// finished (an interrupted run ends with some in flight).
func checkMessages(t *testing.T, run *trace.Run) {
	t.Helper()
	type coll struct {
		rank int32
		comm string
		seq  int64
	}
	done := map[coll]bool{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective {
				done[coll{e.Rank, e.Comm, e.Seq}] = true
			}
		}
	}
	type key struct {
		from, to int32
		comm     string
		seq      int64
		chunk    int32
		bytes    int64
	}
	count := map[key]int{}
	n := 0
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if !done[coll{e.Rank, e.Comm, e.Seq}] || !done[coll{e.Peer, e.Comm, e.Seq}] {
				continue
			}
			switch e.Kind {
			case trace.KindSend:
				count[key{e.Rank, e.Peer, e.Comm, e.Seq, e.Chunk, e.Bytes}]++
				n++
			case trace.KindRecv:
				count[key{e.Peer, e.Rank, e.Comm, e.Seq, e.Chunk, e.Bytes}]--
			}
		}
	}
	if n == 0 {
		t.Fatal("no messages recorded")
	}
	for k, c := range count {
		if c != 0 {
			t.Errorf("message %+v: %d more sends than recvs", k, c)
		}
	}
}

func TestRecordBench(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--ranks", "3", "--out", dir, "--", "bench", "allreduce", "--max", "1M", "--iters", "3", "--warmup", "1")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "recorded "+dir+": 3 ranks,") || !strings.Contains(r.stdout, "next: commprof") {
		t.Errorf("no summary:\n%s", r.stdout)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := run.Manifest
	if len(run.Problems) != 0 || m.Status != trace.StatusComplete || m.WorldSize != 3 || m.Config["op"] != "allreduce" || m.Command[3] != "bench" {
		t.Fatalf("problems %v, manifest %+v", run.Problems, m)
	}
	// Each rank's writer counted its stream for run.json; record printed
	// their sum without reading the streams back.
	var total int64
	for i, e := range m.Ranks {
		if e.ExitStatus == nil || *e.ExitStatus != 0 {
			t.Errorf("rank %d exit status %v", e.Rank, e.ExitStatus)
		}
		if n := int64(len(run.Ranks[i].Events)); e.Events != n {
			t.Errorf("rank %d: run.json counts %d events, its stream holds %d", e.Rank, e.Events, n)
		}
		total += e.Events
	}
	if want := fmt.Sprintf("3 ranks, %d events,", total); !strings.Contains(r.stdout, want) {
		t.Errorf("record printed no %q:\n%s", want, r.stdout)
	}
	// 9 sizes (8 B..1 MiB by 4) × (1 warm-up + 3 timed + 1 checked) allreduces,
	// plus 2 per size for the statistics and a barrier per size and at the start.
	for _, rk := range run.Ranks {
		n := 0
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Name == "allreduce" {
				n++
			}
		}
		if n != 9*(5+2) {
			t.Errorf("rank %d: %d allreduce events, want %d", rk.Info.Rank, n, 9*7)
		}
	}
	checkMessages(t, run)

	d := commprof(t, nil, "dump", dir, "--kind", "collective", "--rank", "1", "--limit", "5", "--format", "json")
	var evs []map[string]any
	if err := json.Unmarshal([]byte(d.stdout), &evs); err != nil || len(evs) != 5 {
		t.Fatalf("dump json: %v, %d events\n%s", err, len(evs), d.stdout)
	}
	for _, e := range evs {
		if e["rank"] != 1.0 || e["kind"] != "collective" {
			t.Errorf("dump filtered badly: %v", e)
		}
	}
	if d := commprof(t, nil, "dump", dir, "--rank", "7"); d.code != exitError || !strings.Contains(d.stderr, "has no rank 7") {
		t.Errorf("dump of a missing rank: %d %q", d.code, d.stderr)
	}
	if d := commprof(t, nil, "dump", t.TempDir()); d.code != exitError || !strings.Contains(d.stderr, "holds no rank-NNNNN.arrows") {
		t.Errorf("dump of an empty directory: %d %q", d.code, d.stderr)
	}
	if r := commprof(t, nil, "record", "--out", dir, "--", "bench", "allreduce"); r.code != exitError || !strings.Contains(r.stderr, "already holds a run; choose another --out, or --force") {
		t.Errorf("record into a used directory: %d %q", r.code, r.stderr)
	}
	if r := commprof(t, nil, "record", "--force", "--ranks", "2", "--out", dir, "--", "bench", "allreduce", "--max", "8"); r.code != 0 {
		t.Errorf("record --force into a used directory: %d %q", r.code, r.stderr)
	} else if run, err := trace.ReadRun(dir); err != nil || run.Manifest.WorldSize != 2 || len(run.Ranks) != 2 {
		t.Errorf("the replaced run: %v %+v", err, run)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if r := commprof(t, []string{envnames.Compact + "=maybe"}, "record", "--ranks", "2", "--out", bad, "--", "bench", "allreduce", "--max", "8"); r.code == 0 || !strings.Contains(r.stderr, `COMMPROF_COMPACT="maybe": want on or off`) {
		t.Errorf("record with COMMPROF_COMPACT=maybe: %d %q", r.code, r.stderr)
	}
}

// TestRecordArrowJS reads recorded runs with Apache Arrow JS, an
// implementation independent of commprof's, for every codec: as the ranks
// wrote them (batches flushed every 2 ms, dictionary deltas between
// them) and as compacted at the end (one batch). Over shared memory a
// 256 KiB allreduce takes about 25 µs, so the run is made long enough
// (1000 iterations per size, 80-100 ms here) to span many flushes.
func TestRecordArrowJS(t *testing.T) {
	node, err := exec.LookPath("node")
	tool, _ := filepath.Abs("../../tools/read-trace.mjs")
	if _, serr := os.Stat("../../node_modules/apache-arrow"); err != nil || serr != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("node or node_modules missing; `make test` installs them")
		}
		t.Skip("node or node_modules missing (make web-deps)")
	}
	for _, tc := range []struct{ codec, compact string }{{"zstd", "off"}, {"lz4", "off"}, {"none", "off"}, {"zstd", "on"}, {"lz4", "on"}} {
		codec := tc.codec
		t.Run(codec+"/compact="+tc.compact, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			r := commprof(t, []string{envnames.Flush + "=2ms", envnames.Compact + "=" + tc.compact}, "record", "--ranks", "2", "--codec", codec, "--out", dir, "--",
				"bench", "allreduce", "--min", "64K", "--max", "256K", "--iters", "1000")
			if r.code != 0 {
				t.Fatalf("record: %d\n%s", r.code, r.stderr)
			}
			out, err := exec.Command(node, tool, dir).Output()
			if err != nil {
				t.Fatalf("arrow js: %v", err)
			}
			var js struct {
				Ranks []struct {
					File     string            `json:"file"`
					Rows     int               `json:"rows"`
					Batches  int               `json:"batches"`
					Metadata map[string]string `json:"metadata"`
					Kinds    map[string]int    `json:"kinds"`
					Samples  map[string]struct {
						N   int     `json:"n"`
						Max float64 `json:"max"`
					} `json:"samples"`
					Bytes string         `json:"bytes"`
					First map[string]any `json:"first"`
				} `json:"ranks"`
			}
			if err := json.Unmarshal(out, &js); err != nil {
				t.Fatal(err)
			}
			run, err := trace.ReadRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(js.Ranks) != len(run.Ranks) {
				t.Fatalf("arrow js saw %d ranks, commprof %d", len(js.Ranks), len(run.Ranks))
			}
			for i, jr := range js.Ranks {
				rk := run.Ranks[i]
				kinds := map[string]int{}
				var bytes int64
				type counter struct {
					n   int
					max float64
				}
				samples := map[string]counter{}
				for _, e := range rk.Events {
					kinds[e.Kind.String()]++
					bytes += e.Bytes
					if e.Kind == trace.KindSample {
						c := samples[e.Name]
						samples[e.Name] = counter{c.n + 1, max(c.max, e.Value)}
					}
				}
				// Every rank samples its memory at the start and the end at least.
				if samples["rss_bytes"].n < 2 || len(jr.Samples) != len(samples) {
					t.Errorf("%s: samples %v, arrow js %v", jr.File, samples, jr.Samples)
				}
				for n, c := range samples {
					if j := jr.Samples[n]; j.N != c.n || j.Max != c.max {
						t.Errorf("%s: %s: arrow js %d readings up to %g, commprof %d up to %g", jr.File, n, j.N, j.Max, c.n, c.max)
					}
				}
				if jr.Rows != len(rk.Events) || fmt.Sprint(jr.Kinds) != fmt.Sprint(kinds) || jr.Bytes != strconv.FormatInt(bytes, 10) {
					t.Errorf("%s: arrow js %d rows %v %s bytes; commprof %d %v %d", jr.File, jr.Rows, jr.Kinds, jr.Bytes, len(rk.Events), kinds, bytes)
				}
				if tc.compact == "off" && jr.Batches < 2 {
					t.Errorf("%s: %d batches; the test wants dictionary deltas across several", jr.File, jr.Batches)
				}
				if tc.compact == "on" && jr.Batches != 1 {
					t.Errorf("%s: %d batches after compaction, want 1", jr.File, jr.Batches)
				}
				if jr.Metadata[trace.MetaRank] != strconv.Itoa(rk.Info.Rank) || jr.Metadata[trace.MetaVersion] != "1" {
					t.Errorf("%s: metadata %v", jr.File, jr.Metadata)
				}
				e := rk.Events[0]
				if jr.First["kind"] != e.Kind.String() || jr.First["name"] != e.Name || jr.First["start_ns"] != strconv.FormatInt(e.Start, 10) || jr.First["comm"] != e.Comm {
					t.Errorf("%s: first row %v, commprof %+v", jr.File, jr.First, e)
				}
			}
		})
	}
}

// startRecording starts a long 4-rank recording and waits until every
// rank has flushed a batch. It returns the record process and the ranks.
func startRecording(t *testing.T, dir string) (*exec.Cmd, *bytes.Buffer, map[int]int) {
	t.Helper()
	cmd, stderr, pids := startJob(t, []string{envnames.Flush + "=50ms"}, "record", "--ranks", "4", "--out", dir, "--",
		"bench", "allreduce", "--min", "1M", "--max", "1M", "--iters", "1000000")
	deadline := time.Now().Add(20 * time.Second)
	for r := range 4 {
		for {
			if st, err := os.Stat(filepath.Join(dir, trace.RankFile(r))); err == nil && st.Size() > 4096 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d flushed nothing in 20s", r)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return cmd, stderr, pids
}

// TestRecordKilledRank kills a rank during a recording: its stream keeps
// every batch it flushed, the others are complete, and the manifest says
// which rank failed.
func TestRecordKilledRank(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cmd, stderr, pids := startRecording(t, dir)
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, _ := waitExit(t, cmd, 30*time.Second); code == 0 {
		t.Fatalf("record exited 0 after a rank was killed\n%s", stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range run.Ranks {
		if (rk.Truncated != nil) != (rk.Info.Rank == 2) {
			t.Errorf("rank %d: truncated %v", rk.Info.Rank, rk.Truncated)
		}
		if len(rk.Events) == 0 {
			t.Errorf("rank %d: no events", rk.Info.Rank)
		}
	}
	m := run.Manifest
	if m.Status != trace.StatusFailed || m.Ranks[2].ExitStatus == nil || *m.Ranks[2].ExitStatus != 128+9 {
		t.Errorf("manifest status %s, rank 2 exit %v", m.Status, m.Ranks[2].ExitStatus)
	}
	if !strings.Contains(stderr.String(), "rank 2 (rank-00002.arrows): trace stream was cut") {
		t.Errorf("record did not report the cut stream:\n%s", stderr)
	}
}

// TestRecordInterrupt stops a recording with SIGINT: every rank closes its
// stream and the manifest says the run was interrupted.
func TestRecordInterrupt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cmd, stderr, _ := startRecording(t, dir)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code, _ := waitExit(t, cmd, 30*time.Second); code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT\n%s", code, stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Problems) != 0 || run.Manifest.Status != trace.StatusInterrupted {
		t.Fatalf("problems %v, status %s\n%s", run.Problems, run.Manifest.Status, stderr)
	}
	checkMessages(t, run)
}

// TestRecordUnderMpirun lets mpirun start the ranks; they find the run
// directory in their environment.
func TestRecordUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("mpirun not found")
		}
		t.Skip("mpirun not installed")
	}
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--out", dir, "--", mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3",
		bin, "bench", "allreduce", "--max", "64K", "--iters", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Ranks) != 3 || len(run.Problems) != 0 || run.Manifest.Launcher != "openmpi" || run.Manifest.Status != trace.StatusComplete {
		t.Fatalf("%d ranks, problems %v, manifest %+v", len(run.Ranks), run.Problems, run.Manifest)
	}
	if run.Manifest.Name != "bench-allreduce" {
		t.Errorf("the run is named %q, want bench-allreduce (its program, not the launcher)", run.Manifest.Name)
	}
	checkMessages(t, run)
}

// TestRecordOnAFullDisk records onto a 3 MiB tmpfs (1 MiB of it the run directory's reserve) until it fills: the run
// ends failed with the cause in run.json, no temporary file is left, and
// the streams read back as cut, every complete batch kept.
func TestRecordOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	dir := filepath.Join(mnt, "run")
	r := commprof(t, nil, "record", "--ranks", "4", "--out", dir, "--", "bench", "allreduce", "--min", "8", "--max", "8", "--iters", "60000")
	if r.code == 0 {
		t.Fatalf("recording onto a full disk succeeded:\n%s", r.stdout)
	}
	m, err := trace.ReadManifest(dir)
	if err != nil || m.Status != trace.StatusFailed || !strings.Contains(m.Error, "no space left on device") {
		t.Fatalf("run.json: %v %+v", err, m)
	}
	// The last write was record's own (only record knows the ranks' exit
	// statuses): the space set aside for it was not used up before.
	exits := 0
	for _, e := range m.Ranks {
		if e.ExitStatus != nil {
			exits++
		}
	}
	if exits == 0 {
		t.Errorf("run.json holds no rank's exit status: record's final write was lost\n%+v", m)
	}
	// Neither temporary files nor the recording's own (its locks, the
	// space it set aside) are left.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") || strings.HasPrefix(e.Name(), ".commprof-") {
			t.Errorf("left %s", e.Name())
		}
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, rk := range run.Ranks {
		kept += len(rk.Events)
		if rk.Truncated != nil && !strings.Contains(rk.Truncated.Error(), "was cut") {
			t.Errorf("rank %d: %v", rk.Info.Rank, rk.Truncated)
		}
	}
	if kept == 0 {
		t.Error("no batch written before the disk filled was kept")
	}
}

// A recording of commprof's ranks under an Open MPI mpirun (here a stand-
// in that says it is one and notes its command line and environment)
// starts it with -x COMMPROF_SECRET, the secret in its environment and
// nowhere on its command line.
func TestRecordUnderMpirunPassesTheSecretOn(t *testing.T) {
	path := t.TempDir()
	note := filepath.Join(path, "mpirun.args")
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = --version ]; then echo 'mpirun (Open MPI) 4.1.2'; exit 0; fi\n" +
		"printf '%s\\n' \"$@\" > " + note + "\n" +
		"printf '%s\\n' \"$COMMPROF_SECRET\" > " + note + ".secret\n" +
		"exit 3\n"
	if err := os.WriteFile(filepath.Join(path, "mpirun"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	r := commprof(t, []string{"PATH=" + path + ":" + os.Getenv("PATH")}, "record", "--out", out, "--", "mpirun", "-H", "a,b", "-np", "2", bin, "train")
	b, err := os.ReadFile(note)
	if err != nil {
		t.Fatalf("the launcher was not run (exit %d): %v\n%s", r.code, err, r.stderr)
	}
	argv := strings.Split(strings.TrimSpace(string(b)), "\n")
	secret, _ := os.ReadFile(note + ".secret")
	s := strings.TrimSpace(string(secret))
	if len(s) < 32 {
		t.Fatalf("the launcher's environment holds the secret %q", s)
	}
	i := slices.Index(argv, envnames.Secret)
	if i < 1 || argv[i-1] != "-x" || !slices.Contains(argv, envnames.TraceDir) {
		t.Errorf("the launcher's command line does not pass the secret on: %q", argv)
	}
	for _, a := range argv {
		if strings.Contains(a, s) {
			t.Errorf("the secret's value is on the launcher's command line: %q", argv)
		}
	}
	if r.code == 0 {
		t.Errorf("a launcher that failed: exit 0")
	}
}

// TestRecordAfterATypo: a run whose program refused a mistyped flag left
// a failed run.json and no event; the corrected command records into the
// same --out without --force. A run with events still needs --force.
func TestRecordAfterATypo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--ranks", "2", "--out", dir, "--", "bench", "allreduce", "--no-such-flag")
	if r.code == 0 {
		t.Fatalf("a mistyped flag of the program: exit 0\n%s", r.stderr)
	}
	if m, err := trace.ReadManifest(dir); err != nil || m.Status != trace.StatusFailed {
		t.Fatalf("the failed run's manifest: %v, %+v", err, m)
	}
	r = commprof(t, nil, "record", "--ranks", "2", "--out", dir, "--", "bench", "allreduce", "--max", "1K", "--iters", "1", "--warmup", "0")
	if r.code != 0 || !strings.Contains(r.stderr, "replacing the run in "+dir+", which failed before recording any event") {
		t.Fatalf("the corrected command: exit %d\n%s", r.code, r.stderr)
	}
	if m, err := trace.ReadManifest(dir); err != nil || m.Status != trace.StatusComplete {
		t.Fatalf("the corrected run's manifest: %v, %+v", err, m)
	}
	r = commprof(t, nil, "record", "--ranks", "2", "--out", dir, "--", "bench", "allreduce", "--no-such-flag")
	if r.code != exitError || !strings.Contains(r.stderr, "already holds a run; choose another --out, or --force") {
		t.Fatalf("recording over a run with events: exit %d\n%s", r.code, r.stderr)
	}
}

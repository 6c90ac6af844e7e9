package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// doctorOut is what the tests read of `doctor --format json`
// (docs/doctor.md).
type doctorOut struct {
	Verdict  string `json:"verdict"`
	Culprits []int  `json:"culprits"`
	Ranks    []struct {
		Rank       int    `json:"rank"`
		State      string `json:"state"`
		Op         string `json:"op"`
		Comm       string `json:"comm"`
		Seq        int64  `json:"seq"`
		ExitStatus *int   `json:"exit_status"`
	} `json:"ranks"`
	Mismatches []struct {
		Comm   string   `json:"comm"`
		Seq    int64    `json:"seq"`
		Ranks  []int    `json:"ranks"`
		Fields []string `json:"fields"`
	} `json:"mismatches"`
}

func doctorJSON(t *testing.T, dir string) doctorOut {
	t.Helper()
	r := commprof(t, nil, "doctor", "--format", "json", dir)
	if r.code != 0 {
		t.Fatalf("doctor: exit %d\n%s", r.code, r.stderr)
	}
	var d doctorOut
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor JSON: %v\n%s", err, r.stdout)
	}
	return d
}

// TestDoctorInjectedFaults records commprof's own ranks (4 of them,
// more than this machine's cores) with an injected hang, mismatch or
// kill: record's stall report and doctor must name the injected rank and
// call. bench allreduce's first collective is a barrier, so its k-th
// collective call on world has seq k-1.
func TestDoctorInjectedFaults(t *testing.T) {
	cases := []struct {
		fault   string
		rank    int
		at      int64
		verdict string
		field   string // what differs at the call; "" for none
	}{
		{"hang:rank=1,at=6", 1, 6, "hang", "missing"},
		{"mismatch:rank=2,at=4,call=broadcast", 2, 4, "mismatch", "op"},
		{"mismatch:rank=3,at=4,call=half", 3, 4, "mismatch", "bytes"},
		{"kill:rank=2,at=5", 2, 5, "died", ""},
	}
	for _, c := range cases {
		t.Run(strings.Split(c.fault, ":")[0]+"-"+fmt.Sprint(c.rank), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			r := commprof(t, nil, "record", "--ranks", "4", "--stall-after", "1s", "--on-stall", "abort", "--inject", c.fault,
				"--out", dir, "--", "bench", "allreduce", "--max", "64K", "--iters", "3", "--warmup", "1")
			// A mismatch may hang, fail or even complete; the others
			// cannot end well.
			if r.code == 0 && c.verdict != "mismatch" {
				t.Fatalf("record of a faulty job exited 0\n%s", r.stderr)
			}
			if c.verdict == "hang" {
				want := fmt.Sprintf("rank %d has not entered allreduce #%d on world", c.rank, c.at)
				if !strings.Contains(r.stderr, want) {
					t.Errorf("record's stall report does not say %q:\n%s", want, r.stderr)
				}
				b, err := os.ReadFile(filepath.Join(dir, "stall.txt"))
				if err != nil || !strings.Contains(string(b), want) {
					t.Errorf("stall.txt (%v) does not say %q:\n%s", err, want, b)
				}
			}
			d := doctorJSON(t, dir)
			if d.Verdict != c.verdict || !slices.Equal(d.Culprits, []int{c.rank}) {
				t.Errorf("verdict %q, culprits %v; want %q, [%d]", d.Verdict, d.Culprits, c.verdict, c.rank)
			}
			switch {
			case c.field != "":
				if len(d.Mismatches) == 0 {
					t.Fatal("no mismatch")
				}
				m := d.Mismatches[0]
				if m.Comm != "world" || m.Seq != c.at-1 || !slices.Equal(m.Ranks, []int{c.rank}) || !slices.Contains(m.Fields, c.field) {
					t.Errorf("mismatch %+v, want world seq %d, ranks [%d], field %s", m, c.at-1, c.rank, c.field)
				}
			default: // the kill
				k := d.Ranks[c.rank]
				if k.ExitStatus == nil || *k.ExitStatus != 128+9 || k.Op != "allreduce" || k.Seq != c.at-1 {
					t.Errorf("killed rank: %+v, want exit status 137 inside allreduce seq %d", k, c.at-1)
				}
			}
		})
	}
}

// TestDoctorNCCLLog imports NCCL INFO logs of 4 ranks with a known fault
// (one rank's log stops at an opCount the others pass; one rank logs a
// Broadcast where the others log an AllReduce) and checks that doctor
// names the rank and the opCount.
func TestDoctorNCCLLog(t *testing.T) {
	write := func(stopRank, stopAt, oddRank, oddAt int) string {
		var b strings.Builder
		for r := range 4 {
			fmt.Fprintf(&b, "node1:%d:%d [%d] NCCL INFO ncclCommInitRank comm 0x%d000 rank %d nranks 4 cudaDev %d nvmlDev %d busId %d000 commId 0xaaa - Init COMPLETE\n",
				100+r, 100+r, r, r+1, r, r, r, r)
		}
		for op := range 6 {
			for r := range 4 {
				if r == stopRank && op >= stopAt {
					continue
				}
				name := "AllReduce"
				if r == oddRank && op == oddAt {
					name = "Broadcast"
				}
				fmt.Fprintf(&b, "node1:%d:%d [%d] NCCL INFO %s: opCount %x sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x%d000 [nranks=4] stream 0x5000\n",
					100+r, 100+r, r, name, op, r+1)
			}
		}
		p := filepath.Join(t.TempDir(), "nccl.log")
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name           string
		log            string
		rank, seq      int
		verdict, field string
	}{
		{"stops", write(2, 4, -1, -1), 2, 4, "hang", "missing"},
		{"broadcast", write(-1, -1, 1, 2), 1, 2, "mismatch", "op"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if r := commprof(t, nil, "import", "--format", "nccl-log", "--out", dir, c.log); r.code != 0 {
				t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
			}
			d := doctorJSON(t, dir)
			if d.Verdict != c.verdict || !slices.Equal(d.Culprits, []int{c.rank}) || len(d.Mismatches) == 0 {
				t.Fatalf("verdict %q, culprits %v, %d mismatches; want %q, [%d]", d.Verdict, d.Culprits, len(d.Mismatches), c.verdict, c.rank)
			}
			m := d.Mismatches[0]
			if m.Comm != "world" || m.Seq != int64(c.seq) || !slices.Equal(m.Ranks, []int{c.rank}) || !slices.Contains(m.Fields, c.field) {
				t.Errorf("mismatch %+v, want world opCount %d, ranks [%d], field %s", m, c.seq, c.rank, c.field)
			}
		})
	}
}

func TestDoctorBadRun(t *testing.T) {
	r := commprof(t, nil, "doctor", filepath.Join(t.TempDir(), "nothing"))
	if r.code != 1 || !strings.Contains(r.stderr, "nothing") {
		t.Errorf("doctor of a missing run: exit %d\n%s", r.code, r.stderr)
	}
	r = commprof(t, nil, "doctor", "--format", "yaml", t.TempDir())
	if r.code != 2 {
		t.Errorf("doctor --format yaml: exit %d\n%s", r.code, r.stderr)
	}
	r = commprof(t, nil, "record", "--stall-after", "-1s", "--", "bench", "allreduce")
	if r.code != 2 || !strings.Contains(r.stderr, "--stall-after") {
		t.Errorf("record --stall-after -1s: exit %d\n%s", r.code, r.stderr)
	}
	r = commprof(t, nil, "record", "--on-stall", "wait", "--", "bench", "allreduce")
	if r.code != 2 || !strings.Contains(r.stderr, "--on-stall") {
		t.Errorf("record --on-stall wait: exit %d\n%s", r.code, r.stderr)
	}
}

package pmpi

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The doctor on MPI programs with a known fault (testdata/hang.py and
// hang.c): one rank stops before its k-th Allreduce, calls Bcast or a
// smaller Allreduce there, raises or exits. record --stall-after must
// report the stall live and end the job (--on-stall abort), and doctor
// must name the rank and the call the program's arguments chose, on 4
// ranks (more than this machine's cores).

// doctorReport is what the tests read of `commprof doctor --format json`
// (docs/doctor.md).
type doctorReport struct {
	Verdict  string `json:"verdict"`
	Culprits []int  `json:"culprits"`
	Ranks    []struct {
		Rank  int    `json:"rank"`
		State string `json:"state"`
		Op    string `json:"op"`
		Comm  string `json:"comm"`
		Seq   int64  `json:"seq"`
	} `json:"ranks"`
	Mismatches []struct {
		Comm   string   `json:"comm"`
		Seq    int64    `json:"seq"`
		Ranks  []int    `json:"ranks"`
		Fields []string `json:"fields"`
		Sides  []struct {
			Ranks   []int  `json:"ranks"`
			Op      string `json:"op"`
			Bytes   int64  `json:"bytes"`
			Missing bool   `json:"missing"`
		} `json:"sides"`
	} `json:"mismatches"`
}

func TestDoctorNamesInjectedFault(t *testing.T) {
	type tc struct {
		flavor  Flavor
		python  bool
		fault   string
		bad, at int
		// want: the verdict, and the field that differs at call at
		// ("missing" for a rank that never called it, "" for a kill)
		verdict, field string
		// inject: the fault comes from record --inject (the program
		// runs clean: FAULT none)
		inject bool
	}
	cases := []tc{
		{OpenMPI, true, "hang", 1, 6, "hang", "missing", false},
		{OpenMPI, true, "bcast", 3, 4, "mismatch", "op", false},
		{OpenMPI, true, "size", 2, 3, "mismatch", "bytes", false},
		{OpenMPI, true, "raise", 2, 3, "hang", "missing", false},
		{OpenMPI, false, "exit", 0, 5, "hang", "missing", false},
		{MPICH, false, "hang", 2, 3, "hang", "missing", false},
		{MPICH, false, "bcast", 1, 2, "mismatch", "op", false},
		{MPICH, false, "size", 3, 4, "mismatch", "bytes", false},
		{OpenMPI, true, "phang", 2, 5, "hang", "", false},
		{OpenMPI, true, "pbcast", 1, 3, "hang", "missing", false},
		{OpenMPI, true, "hang", 2, 4, "hang", "missing", true},
		{OpenMPI, false, "kill", 1, 3, "died", "", true},
		{MPICH, false, "hang", 3, 5, "hang", "missing", true},
		{MPICH, false, "mismatch", 1, 4, "mismatch", "op", true},
		{OpenMPI, false, "half", 2, 6, "mismatch", "bytes", true},
	}
	for _, c := range cases {
		lang := "c"
		if c.python {
			lang = "py"
		}
		name := fmt.Sprintf("%s-%s-%s", c.flavor, lang, c.fault)
		if c.inject {
			name += "-injected"
		}
		t.Run(name, func(t *testing.T) {
			m := findMPI(t, c.flavor)
			library(t, m)
			bin := commprofBin(t)
			var prog []string
			if c.python {
				prog = []string{python(t), filepath.Join(mustAbs(t, "testdata"), "hang.py")}
			} else {
				prog = []string{cProgram(t, m, "hang")}
			}
			args := []string{"record", "--stall-after", "4s", "--on-stall", "abort"}
			if c.inject {
				fault := fmt.Sprintf("%s:rank=%d,at=%d", c.fault, c.bad, c.at)
				switch c.fault {
				case "mismatch":
					fault += ",call=broadcast"
				case "half":
					fault = fmt.Sprintf("mismatch:rank=%d,at=%d,call=half", c.bad, c.at)
				}
				args = append(args, "--inject", fault)
				prog = append(prog, "none", "0", "0")
			} else {
				prog = append(prog, c.fault, fmt.Sprint(c.bad), fmt.Sprint(c.at))
			}
			dir := filepath.Join(t.TempDir(), "run")
			args = append(append(args, "--out", dir, "--", m.run), m.args...)
			args = append(append(args, "-np", "4"), prog...)
			res := command(t, nil, "", bin, args...)
			if res.err == nil {
				t.Fatalf("record of a faulty job exited 0\n%s", res.stderr)
			}
			// The live report, when the job hung rather than failed.
			want := fmt.Sprintf("rank %d has not entered allreduce #%d on world", c.bad, c.at)
			if c.fault == "hang" && !strings.Contains(res.stderr, want) {
				t.Errorf("record's stall report does not say %q:\n%s", want, res.stderr)
			}
			d := doctorJSON(t, bin, dir)
			if d.Verdict != c.verdict {
				t.Errorf("verdict %q, want %q", d.Verdict, c.verdict)
			}
			if !slices.Equal(d.Culprits, []int{c.bad}) {
				t.Errorf("culprits %v, want [%d]", d.Culprits, c.bad)
			}
			if len(d.Ranks) != 4 {
				t.Fatalf("%d ranks in the diagnosis, want 4", len(d.Ranks))
			}
			seq := int64(c.at - 1)
			if c.fault == "hang" || c.fault == "bcast" {
				for _, r := range d.Ranks {
					if r.Rank != c.bad && (r.State != "blocked" || r.Op != "allreduce" || r.Seq != seq || r.Comm != "world") {
						t.Errorf("rank %d: %s in %s seq %d on %q, want blocked in allreduce seq %d on world", r.Rank, r.State, r.Op, r.Seq, r.Comm, seq)
					}
				}
			}
			if c.fault == "hang" && d.Ranks[c.bad].State != "computing" {
				t.Errorf("rank %d: state %q, want computing", c.bad, d.Ranks[c.bad].State)
			}
			if strings.HasPrefix(c.fault, "p") {
				// Pickled objects: mpi4py's allreduce is messages and
				// broadcasts on a duplicate of the world, so the world's
				// call numbers are not the program's; a broadcast on the
				// world is the odd call there.
				if c.fault == "pbcast" {
					mm := d.Mismatches
					if len(mm) == 0 || mm[0].Comm != "world" || !slices.Equal(mm[0].Ranks, []int{c.bad}) {
						t.Errorf("mismatches %+v, want the first on world with rank %d", mm, c.bad)
					}
				}
				return
			}
			if c.field == "" { // a kill: Open MPI's mpirun says which rank died
				k := d.Ranks[c.bad]
				if k.Op != "allreduce" || k.Seq != seq {
					t.Errorf("killed rank %d: in %s seq %d, want allreduce seq %d", c.bad, k.Op, k.Seq, seq)
				}
				return
			}
			if len(d.Mismatches) == 0 {
				t.Fatalf("no mismatch found")
			}
			mm := d.Mismatches[0]
			if mm.Comm != "world" || mm.Seq != seq || !slices.Equal(mm.Ranks, []int{c.bad}) || !slices.Contains(mm.Fields, c.field) {
				t.Errorf("first mismatch at %s seq %d, ranks %v, fields %v; want world seq %d, ranks [%d], field %s",
					mm.Comm, mm.Seq, mm.Ranks, mm.Fields, seq, c.bad, c.field)
			}
			if c.fault == "bcast" {
				ops := map[string][]int{}
				for _, s := range mm.Sides {
					ops[s.Op] = s.Ranks
				}
				if !slices.Equal(ops["broadcast"], []int{c.bad}) || len(ops["allreduce"]) != 3 {
					t.Errorf("sides %+v, want rank %d broadcast and 3 ranks allreduce", mm.Sides, c.bad)
				}
			}
		})
	}
}

// TestDoctorCleanRun checks that a run without a fault has no culprit.
func TestDoctorCleanRun(t *testing.T) {
	m := findMPI(t, OpenMPI)
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"record", "--stall-after", "2s", "--out", dir, "--", m.run}, m.args...)
	args = append(args, "-np", "4", cProgram(t, m, "hang"), "none", "0", "1")
	if res := command(t, nil, "", bin, args...); res.err != nil {
		t.Fatalf("record: %v\n%s", res.err, res.stderr)
	}
	d := doctorJSON(t, bin, dir)
	if d.Verdict != "ok" || len(d.Culprits) != 0 || len(d.Mismatches) != 0 {
		t.Errorf("clean run: verdict %q, culprits %v, %d mismatches", d.Verdict, d.Culprits, len(d.Mismatches))
	}
	for _, r := range d.Ranks {
		if r.State != "finished" {
			t.Errorf("rank %d: state %q, want finished", r.Rank, r.State)
		}
	}
}

func doctorJSON(t *testing.T, bin, dir string) doctorReport {
	t.Helper()
	res := command(t, nil, "", bin, "doctor", "--format", "json", dir)
	if res.err != nil {
		t.Fatalf("doctor: %v\n%s", res.err, res.stderr)
	}
	var d doctorReport
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatalf("doctor JSON: %v\n%s", err, res.stdout)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("doctor: %s", res.stdout)
	}
	return d
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

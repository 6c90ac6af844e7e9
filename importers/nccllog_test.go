package importers

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// splicedLog is an NCCL_DEBUG=INFO log that several processes wrote into
// one file, as splicedNCCLLog makes it, with what the writer knows of it.
type splicedLog struct {
	text string
	// intact counts, per process, the AllReduce lines written in one
	// piece; lost those written in two with other lines between.
	intact, lost []int
	// whole holds, per process, the opCounts of the AllReduce lines
	// written in one piece.
	whole []map[int64]bool
	// fragments counts the pieces of split lines.
	fragments int
	hosts     []string
	pids      []int
}

// splicedNCCLLog writes the lines of procs processes, each creating one
// communicator and making calls AllReduces, into one log as processes
// sharing a file do: in an order of their own, and with some lines
// written in two pieces between which other processes' lines (themselves
// sometimes split) land. A line split inside its prefix leaves a tail
// whose host lost its first letters ("one:2029567:...") and a head that
// glues onto the next line's host ("con" + "stone:2029567:...").
func splicedNCCLLog(seed int64, procs, calls int) *splicedLog {
	rng := rand.New(rand.NewSource(seed))
	sl := &splicedLog{intact: make([]int, procs), lost: make([]int, procs)}
	for range procs {
		sl.whole = append(sl.whole, map[int64]bool{})
	}
	type line struct {
		text      string
		proc      int
		allreduce bool
		op        int64
	}
	queues := make([][]line, procs)
	for p := range procs {
		host := "stone"
		if p >= procs/2 {
			host = "gpu-node2"
		}
		pid := 2029564 + p
		sl.hosts, sl.pids = append(sl.hosts, host), append(sl.pids, pid)
		pre := fmt.Sprintf("%s:%d:%d [%d] NCCL INFO ", host, pid, pid, p%2)
		comm := 0x5587_0000_0000 + p*0x1000
		q := []line{
			{text: pre + "Bootstrap : Using eth0:10.0.0." + fmt.Sprint(p+1) + "<0>"},
			{text: pre + "NCCL version 2.19.3+cuda12.2"},
			{text: fmt.Sprintf("%sConnected to proxy localRank %d -> connection 0x7f%x", pre, p%2, p)},
			{text: fmt.Sprintf("%sncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %d000 commId 0xec4ad54506d878f7 - Init COMPLETE", pre, comm, p, procs, p%2, p%2, p+1)},
		}
		for op := range calls {
			q = append(q, line{text: fmt.Sprintf("%sAllReduce: opCount %x sendbuff 0x7f%07x recvbuff 0x7f%07x count %d datatype 7 op 0 root 0 comm 0x%x [nranks=%d] stream 0x5587%08x",
				pre, op, op*64, op*64, 1024<<(op%8), comm, procs, p), allreduce: true, op: int64(op)})
			q = append(q, line{text: fmt.Sprintf("%sAllReduce: %d Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}", pre, 4096<<(op%8))})
		}
		for i := range q {
			q[i].proc = p
		}
		queues[p] = q
	}
	var b strings.Builder
	// pop takes the next line of a process not in the middle of writing
	// one (busy).
	pop := func(busy []int) (line, bool) {
		var live []int
		for p, q := range queues {
			if len(q) > 0 && !slices.Contains(busy, p) {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			return line{}, false
		}
		p := live[rng.Intn(len(live))]
		l := queues[p][0]
		queues[p] = queues[p][1:]
		return l, true
	}
	var write func(l line, busy []int)
	write = func(l line, busy []int) {
		depth := len(busy)
		busy = append(busy, l.proc)
		others := false
		for p, q := range queues {
			others = others || !slices.Contains(busy, p) && len(q) > 0
		}
		if depth > 1 || !others || rng.Float64() > 0.15 {
			b.WriteString(l.text + "\n")
			if l.allreduce {
				sl.intact[l.proc]++
				sl.whole[l.proc][l.op] = true
			}
			return
		}
		// Split: mostly inside the prefix, where hosts get cut and glued.
		k := 1 + rng.Intn(len(l.text)-1)
		if rng.Intn(2) == 0 {
			k = 1 + rng.Intn(12)
		}
		b.WriteString(l.text[:k])
		for range 1 + rng.Intn(2) {
			if o, ok := pop(busy); ok {
				write(o, busy)
			}
		}
		b.WriteString(l.text[k:] + "\n")
		sl.fragments += 2
		if l.allreduce {
			sl.lost[l.proc]++
		}
	}
	for {
		l, ok := pop(nil)
		if !ok {
			break
		}
		write(l, nil)
	}
	sl.text = b.String()
	return sl
}

// TestImportNCCLLogSpliced: four processes writing one log give four
// ranks on their two hosts and every AllReduce line written in one
// piece, wherever it sits in a line; fragments make no rank, host or
// call, and are counted.
func TestImportNCCLLogSpliced(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sl := splicedNCCLLog(seed, 4, 130)
			if sum(sl.lost) == 0 || !strings.Contains(sl.text, "constone:") && !strings.Contains(sl.text, "gpu-node2stone:") && !strings.Contains(sl.text, "stonestone:") {
				t.Logf("seed %d: %d AllReduce lines split", seed, sum(sl.lost))
			}
			path := filepath.Join(t.TempDir(), "nccl.log")
			if err := os.WriteFile(path, []byte(sl.text), 0o644); err != nil {
				t.Fatal(err)
			}
			res, run := importRun(t, Options{Format: NCCLLog}, path)
			m := res.Manifest
			if len(m.Ranks) != 4 || m.WorldSize != 4 {
				t.Fatalf("%d ranks, world %d: %+v", len(m.Ranks), m.WorldSize, m.Ranks)
			}
			hosts := map[string]int{}
			for _, re := range m.Ranks {
				hosts[re.Host]++
				p := re.PID - 2029564
				if p < 0 || p >= 4 || re.Host != sl.hosts[p] {
					t.Errorf("rank %d is %s:%d, which no process was", re.Rank, re.Host, re.PID)
					continue
				}
				var n int
				for _, e := range rankEvents(run, re.Rank) {
					if e.Kind != trace.KindCollective || e.Name != "allreduce" || e.Comm != "world" {
						t.Errorf("rank %d: %+v", re.Rank, e)
					}
					n++
					if !sl.whole[p][e.Seq] {
						t.Errorf("rank %d: opCount %x was not written whole", re.Rank, e.Seq)
					}
				}
				if n != sl.intact[p] {
					t.Errorf("rank %d (pid %d): %d calls, want the %d AllReduce lines written whole (%d were split)", re.Rank, re.PID, n, sl.intact[p], sl.lost[p])
				}
			}
			if len(hosts) != 2 || hosts["stone"] != 2 || hosts["gpu-node2"] != 2 {
				t.Errorf("hosts %v", hosts)
			}
			// Every split line leaves a head before another record, which
			// is counted; its tail is counted when it is recognisably
			// NCCL's.
			cut := m.Source.Skipped["NCCL lines cut or overwritten by another process's (not read)"]
			if cut < int64(sl.fragments/2) || cut > int64(sl.fragments) {
				t.Errorf("%d fragments counted, want between %d and %d (skipped %v)", cut, sl.fragments/2, sl.fragments, m.Source.Skipped)
			}
		})
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

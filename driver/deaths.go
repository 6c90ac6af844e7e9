package driver

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"sync"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// deathLog reads what an MPI launcher says on its standard error about a
// rank that died, passing every byte on: Open MPI's mpirun names the rank
// and the signal ("mpirun noticed that process rank 2 with PID 0 on node
// vm exited on signal 9 (Killed)."). A PMPI run has no other word of a
// rank's exit status; doctor names a rank killed inside a call by it.
// (MPICH's Hydra prints, on its standard output, a pid that is not the
// dead rank's: it is not read.)
type deathLog struct {
	w    io.Writer
	mu   sync.Mutex
	line []byte
	// byRank: exit statuses (128+signal for a signal)
	byRank map[int]int
}

var (
	ompiDeath = regexp.MustCompile(`noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)`)
	ompiExit  = regexp.MustCompile(`process rank (\d+) with PID \d+ on node \S+ exited with status (\d+)`)
)

func newDeathLog(w io.Writer) *deathLog {
	return &deathLog{w: w, byRank: map[int]int{}}
}

func (d *deathLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	d.line = append(d.line, p...)
	for {
		i := bytes.IndexByte(d.line, '\n')
		if i < 0 {
			break
		}
		d.scan(string(d.line[:i]))
		d.line = d.line[i+1:]
	}
	if len(d.line) > 4096 {
		d.line = d.line[:0] // not a launcher's line
	}
	d.mu.Unlock()
	return d.w.Write(p)
}

func (d *deathLog) scan(l string) {
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if m := ompiDeath.FindStringSubmatch(l); m != nil {
		d.byRank[atoi(m[1])] = 128 + atoi(m[2])
	} else if m := ompiExit.FindStringSubmatch(l); m != nil {
		d.byRank[atoi(m[1])] = atoi(m[2])
	}
}

// record adds the exit statuses the launcher told of to the run's
// manifest.
func (d *deathLog) record(dir string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.byRank) == 0 {
		return nil
	}
	status := d.byRank
	return rundir.Finish(dir, func(m *trace.Manifest) (*trace.Manifest, error) {
		if m == nil {
			return nil, nil
		}
		for i := range m.Ranks {
			if s, ok := status[m.Ranks[i].Rank]; ok && m.Ranks[i].ExitStatus == nil {
				s := s
				m.Ranks[i].ExitStatus = &s
			}
		}
		return m, nil
	})
}

package torch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// Missing is what a PyTorch run cannot show, for the manifest's source.
var Missing = []string{
	"messages inside the backend's collectives (gloo, NCCL): each call is recorded, not its algorithm's messages",
}

// ErrNotRecorded means the job ran but no rank opened a spool: no process
// called torch.distributed.init_process_group with the recorder loaded.
var ErrNotRecorded = errors.New("no rank of the PyTorch job was recorded")

// FinishOptions describe the run Finish completes.
type FinishOptions struct {
	Name, RunID     string
	Command         []string // as recorded (commprof record -- python3 train.py ...)
	Launcher        string   // commprof, torchrun, mpi
	CommprofVersion string
	Start           time.Time
	LauncherErr     error // the job's failure (a rank's non-zero exit), if any
	Interrupted     bool
	Codec           trace.Codec
	Warn            func(error) // hears of spools that could not be read
	// Args is the recorded command line: a --batch-size N in it is the
	// run's batch size per rank (config batch_size), as for commprof train.
	Args []string
}

var spoolRE = regexp.MustCompile(`^rank-(\d{5,})\.arrows\.spool$`)

// Spools lists the spools in dir by rank.
func Spools(dir string) map[int]string {
	ents, _ := os.ReadDir(dir)
	out := map[int]string{}
	for _, e := range ents {
		if m := spoolRE.FindStringSubmatch(e.Name()); m != nil {
			if r, err := strconv.Atoi(m[1]); err == nil {
				out[r] = filepath.Join(dir, e.Name())
			}
		}
	}
	return out
}

// Finish turns the spools the ranks left in dir into the run's streams
// (rank-NNNNN.arrows) and writes its manifest; each spool is removed once
// its stream is written. It returns ErrNotRecorded when there is none.
func Finish(dir string, o FinishOptions) (*trace.Manifest, error) {
	paths := Spools(dir)
	if len(paths) == 0 {
		return nil, ErrNotRecorded
	}
	ranks := make([]int, 0, len(paths))
	for r := range paths {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	spools := map[int]*Spool{}
	var problems []string
	for _, r := range ranks {
		f, err := os.Open(paths[r])
		if err != nil {
			return nil, err
		}
		s, err := ReadSpool(f)
		f.Close()
		if err != nil {
			problems = append(problems, fmt.Sprintf("rank %d's spool could not be read (%v)", r, err))
			if o.Warn != nil {
				o.Warn(fmt.Errorf("%s: %w", paths[r], err))
			}
			continue
		}
		if s.Meta.Rank != r {
			return nil, fmt.Errorf("%s says it is rank %d's", paths[r], s.Meta.Rank)
		}
		spools[r] = s
	}
	if len(spools) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotRecorded, strings.Join(problems, "; "))
	}

	// Clocks: every rank of a host reads its CLOCK_MONOTONIC; hosts are put
	// on one time line by their wall clocks, as the lowest rank on each
	// read it beside its monotonic one.
	hostOff := map[string]int64{}
	world := 0
	for _, r := range ranks {
		s := spools[r]
		if s == nil {
			continue
		}
		if _, ok := hostOff[s.Meta.Host]; !ok {
			hostOff[s.Meta.Host] = s.Meta.WallNS - s.Meta.MonoNS
		}
		world = max(world, s.Meta.WorldSize)
	}
	epoch := int64(0)
	first := true
	for _, s := range spools {
		t := s.Meta.MonoNS + hostOff[s.Meta.Host]
		for _, e := range s.Events {
			t = min(t, e.Start+hostOff[s.Meta.Host])
		}
		if first || t < epoch {
			epoch, first = t, false
		}
	}

	m := &trace.Manifest{FormatVersion: trace.FormatVersion, CommprofVersion: o.CommprofVersion, RunID: o.RunID,
		Name: o.Name, WorldSize: world, Launcher: o.Launcher, Command: o.Command, Codec: o.Codec,
		Start: time.Unix(0, epoch), Config: map[string]string{trace.ConfigProgram: "pytorch"}}
	if o.Start.Before(m.Start) {
		m.Start = o.Start
	}
	m.Clock.Method = "same-host"
	if len(hostOff) > 1 {
		// The hosts' wall clocks, as NTP keeps them: not measured here.
		m.Clock.Method = "wall-clock"
		m.Clock.UncertaintyNS = int64(time.Millisecond)
	}
	groups := map[string]Group{}
	var backend, torchV, python string
	for _, r := range ranks {
		s := spools[r]
		if s == nil {
			continue
		}
		backend, torchV, python = s.Meta.Backend, s.Meta.Torch, s.Meta.Python
		for _, g := range s.Groups {
			groups[g.Name] = g
		}
		off := hostOff[s.Meta.Host] - epoch
		for i := range s.Events {
			s.Events[i].Start += off
			if p := s.Events[i].Peer; p < -1 || int(p) >= world {
				s.Events[i].Peer = -1
			}
		}
		file := trace.RankFile(r)
		if err := writeStream(filepath.Join(dir, file), s, world, o); err != nil {
			return nil, err
		}
		os.Remove(paths[r])
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, Host: s.Meta.Host, PID: s.Meta.PID, File: file, Events: int64(len(s.Events))})
		switch {
		case s.Cut != nil:
			problems = append(problems, fmt.Sprintf("rank %d's recording was cut: %v", r, s.Cut))
		}
	}
	m.Config["backend"] = backend
	if torchV != "" {
		m.Config["torch"] = torchV
	}
	if python != "" {
		m.Config["python"] = python
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	trace.SortComms(names)
	m.Config[trace.ConfigComms] = strconv.Itoa(len(names))
	m.Config[trace.ConfigRanks] = strconv.Itoa(world)
	if bs := flagValue(o.Args, "--batch-size"); bs != "" {
		if n, err := strconv.Atoi(bs); err == nil && n > 0 {
			m.Config[trace.ConfigBatchSize] = bs
		}
	}
	for _, n := range names {
		g := groups[n]
		ranks := make([]int32, len(g.Ranks))
		for i, r := range g.Ranks {
			ranks[i] = int32(r)
		}
		v := trace.RankList(ranks)
		if g.Backend != "" && g.Backend != backend {
			v += " (" + g.Backend + ")"
		}
		m.Config[trace.ConfigCommPrefix+n] = v
	}
	tool := "PyTorch " + torchV
	if backend != "" {
		tool += " (" + backend + ")"
	}
	m.Source = &trace.Source{Format: "pytorch", Tool: tool, Missing: Missing}

	var absent []string
	for r := range world {
		if spools[r] == nil && paths[r] == "" {
			absent = append(absent, strconv.Itoa(r))
		}
	}
	if len(absent) > 0 {
		problems = append(problems, "no recording from rank "+strings.Join(absent, ", "))
	}
	switch {
	case o.Interrupted:
		m.Status = trace.StatusInterrupted
	case o.LauncherErr != nil || len(problems) > 0:
		m.Status = trace.StatusFailed
		var why []string
		if o.LauncherErr != nil {
			why = append(why, o.LauncherErr.Error())
		}
		m.Error = strings.Join(append(why, problems...), "; ")
	default:
		m.Status = trace.StatusComplete
	}
	m.End = time.Now()
	if err := rundir.Finish(dir, func(*trace.Manifest) (*trace.Manifest, error) { return m, nil }); err != nil {
		return nil, err
	}
	return m, nil
}

// writeStream writes one rank's events as its stream.
func writeStream(path string, s *Spool, world int, o FinishOptions) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing rank %d's stream: %w", s.Meta.Rank, err)
	}
	defer f.Close()
	w, err := trace.NewWriter(f, trace.RankInfo{Rank: s.Meta.Rank, WorldSize: world, Host: s.Meta.Host, PID: s.Meta.PID,
		RunID: o.RunID}, trace.WriterOptions{Codec: o.Codec, Level: trace.LevelSmallest})
	if err != nil {
		return err
	}
	sort.SliceStable(s.Events, func(i, j int) bool { return s.Events[i].Start < s.Events[j].Start })
	const batch = 1 << 16
	for i := 0; i < len(s.Events); i += batch {
		if err := w.Write(s.Events[i:min(i+batch, len(s.Events))]); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// flagValue is the value of --name V or --name=V in args, "" if absent.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

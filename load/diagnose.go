package load

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// Diagnose reads the run in dir and diagnoses it, telling which of its
// ranks on this host have ended while run.json still says running.
func Diagnose(ctx context.Context, dir string) (*analyze.Diagnosis, []error, error) {
	in, problems, err := DoctorInput(ctx, dir)
	if err != nil {
		return nil, problems, err
	}
	in.Now = time.Now()
	if in.Status == trace.StatusRunning || in.Status == "" {
		in.Gone = GoneRanks(in.InFlight)
		// Still running when a rank of it is alive on this host.
		for _, f := range in.InFlight {
			if f.Host == hostname() && !in.Gone[f.Rank] {
				in.Live = true
			}
		}
		if !in.Live && len(in.Gone) > 0 && len(in.Gone) == len(in.InFlight) {
			in.Ended = true
		}
	} else {
		in.Ended = true
	}
	d := analyze.Diagnose(in)
	return &d, problems, nil
}

// GoneRanks are the ranks, among those whose in-flight file names this
// host, whose process no longer exists.
func GoneRanks(fl []*trace.InFlight) map[int]bool {
	gone := map[int]bool{}
	host := hostname()
	for _, f := range fl {
		if f.Host != host || f.PID <= 0 {
			continue
		}
		if err := syscall.Kill(f.PID, 0); err == syscall.ESRCH {
			gone[f.Rank] = true
		}
	}
	return gone
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// AttachDiagnosis gives the summary of a run that did not end well the
// doctor's diagnosis, which stats and report lead with. A complete run is
// not read again for it.
func AttachDiagnosis(ctx context.Context, dir string, s *analyze.Summary) {
	if s.Run.Status == trace.StatusComplete {
		return
	}
	d, _, err := Diagnose(ctx, dir)
	if err == nil && !d.Healthy() {
		s.Diagnosis = d
	}
}

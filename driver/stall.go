package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// The live stall report of record (docs/doctor.md): record reads the
// ranks' in-flight files while the job runs and, when no rank has
// completed a call for --stall-after while one is blocked in a call, says
// who waits for whom, without stopping the job unless --on-stall abort.

// DefaultStallAfter is --stall-after's default: long enough that a slow
// collective or a rank's long I/O between calls is not taken for a hang
// on a loaded machine, short enough to hear of a hang within a minute.
const DefaultStallAfter = 60 * time.Second

// StallOptions say when record reports a stall and what it does then.
type StallOptions struct {
	// After is how long no rank may complete a call while one waits in a
	// call before a stall is reported (0: never).
	After time.Duration
	// OnStall is "report" (print it and write it into the run; the job
	// goes on) or "abort" (end the job after the report).
	OnStall string
}

func (o *StallOptions) check() error {
	if o.After < 0 {
		return Usagef("--stall-after %s: want a duration of 0 or more (0 turns the stall report off)", o.After)
	}
	if o.OnStall != "report" && o.OnStall != "abort" {
		return Usagef("--on-stall %q: want report or abort", o.OnStall)
	}
	return nil
}

// stallReport is stall.json: the diagnosis and when the stall was seen.
type stallReport struct {
	// Stalled is false once the ranks progress again.
	Stalled bool `json:"stalled"`
	// Since is when a rank last completed a call (as record saw it); At,
	// when this report was written.
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
	// Aborted is true when record ended the job for it (--on-stall abort).
	Aborted   bool               `json:"aborted"`
	Diagnosis *analyze.Diagnosis `json:"diagnosis"`
}

// stallWatch watches a job's in-flight files.
type stallWatch struct {
	dir    string
	o      StallOptions
	stderr io.Writer
	end    context.CancelFunc // ends the job (--on-stall abort)
	done   chan struct{}
	stop   context.CancelFunc

	mu      sync.Mutex
	aborted *analyze.Diagnosis
}

// watchStalls starts watching the job that record is about to start into
// dir; the job runs under the returned context, which the watch cancels
// to abort it. Call finish once the job has ended.
func watchStalls(ctx context.Context, dir string, o StallOptions, stderr io.Writer) (context.Context, *stallWatch) {
	jobCtx, end := context.WithCancel(ctx)
	w := &stallWatch{dir: dir, o: o, stderr: stderr, end: end, done: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	if o.After <= 0 {
		close(w.done)
		return jobCtx, w
	}
	go w.run(wctx)
	return jobCtx, w
}

// finish stops the watch; it returns the error the job ends with when the
// watch aborted it.
func (w *stallWatch) finish() error {
	w.stop()
	<-w.done
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted == nil {
		return nil
	}
	return fmt.Errorf("stalled, ended by --on-stall abort: %s", w.aborted.Headline())
}

func (w *stallWatch) run(ctx context.Context) {
	defer close(w.done)
	poll := min(max(w.o.After/5, 50*time.Millisecond), time.Second)
	t := time.NewTicker(poll)
	defer t.Stop()
	last := time.Now()
	var sig string
	var stalled bool
	var said string
	var wrote time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fl, _ := trace.ReadInFlightDir(w.dir)
		now := time.Now()
		if s := progressSignature(fl); s != sig {
			sig, last = s, now
			if stalled {
				stalled, said = false, ""
				fmt.Fprintf(w.stderr, "commprof: the ranks progress again after the stall\n")
				w.write(&stallReport{Stalled: false, Since: last, At: now})
			}
			continue
		}
		if now.Sub(last) < w.o.After || !anyBlocked(fl) {
			continue
		}
		d := analyze.Diagnose(analyze.DoctorInput{Live: true, Now: now, InFlight: fl, Gone: load.GoneRanks(fl), World: worldOf(fl)})
		stalled = true
		key := strings.Join(stripTimes(d.Summary), "\n")
		if key != said {
			said = key
			var b bytes.Buffer
			fmt.Fprintf(&b, "\ncommprof: stall: no rank has completed a call for %s (report in %s)\n",
				now.Sub(last).Round(100*time.Millisecond), filepath.Join(w.dir, trace.StallText))
			_ = report.WriteDiagnosis(&b, &d)
			_, _ = w.stderr.Write(b.Bytes())
		}
		abort := w.o.OnStall == "abort"
		if abort || now.Sub(wrote) >= time.Second {
			wrote = now
			w.write(&stallReport{Stalled: true, Since: last, At: now, Aborted: abort, Diagnosis: &d})
		}
		if abort {
			fmt.Fprintf(w.stderr, "commprof: ending the job (--on-stall abort)\n")
			w.mu.Lock()
			w.aborted = &d
			w.mu.Unlock()
			w.end()
			return
		}
	}
}

// write writes the report into the run directory, text and JSON.
func (w *stallWatch) write(r *stallReport) {
	ctx := context.Background()
	_, _ = atomicfile.Write(ctx, filepath.Join(w.dir, trace.StallJSON), func(out io.Writer) error {
		enc := json.NewEncoder(out)
		enc.SetIndent("", " ")
		return enc.Encode(r)
	})
	_, _ = atomicfile.Write(ctx, filepath.Join(w.dir, trace.StallText), func(out io.Writer) error {
		if !r.Stalled {
			_, err := fmt.Fprintf(out, "no stall: the ranks progressed again at %s\n", r.At.Format(time.RFC3339))
			return err
		}
		fmt.Fprintf(out, "stall seen at %s: no rank completed a call since %s\n", r.At.Format(time.RFC3339), r.Since.Format(time.RFC3339))
		return report.WriteDiagnosis(out, r.Diagnosis)
	})
}

// progressSignature changes whenever a rank completes a call, arrives or
// changes state.
func progressSignature(fl []*trace.InFlight) string {
	var b strings.Builder
	for _, f := range fl {
		fmt.Fprintf(&b, "%d:%d:%d;", f.Rank, f.Completed, f.State)
	}
	return b.String()
}

func anyBlocked(fl []*trace.InFlight) bool {
	for _, f := range fl {
		if f.State == trace.InFlightBlocked {
			return true
		}
	}
	return false
}

func worldOf(fl []*trace.InFlight) int {
	n := 0
	for _, f := range fl {
		n = max(n, f.World)
	}
	return n
}

// stripTimes drops what changes with the clock alone from the summary's
// sentences (the "(for 7.2s)" parts), so that a stall is printed again
// only when what it says changes.
func stripTimes(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		for {
			j := strings.Index(l, " (for ")
			if j < 0 {
				break
			}
			k := strings.IndexByte(l[j:], ')')
			if k < 0 {
				break
			}
			l = l[:j] + l[j+k+1:]
		}
		out[i] = l
	}
	return out
}

// Package inject puts faults into a job on purpose: a rank that arrives
// late at its collectives, a rank that the operating system stops, a slow
// link between two ranks, a CPU hog beside a rank. Users inject them to
// learn what a straggler or a slow link looks like in a report and to
// check commprof on their own cluster; commprof's tests inject them as a
// truth the analyses must recover.
//
// Faults are written as text (Parse, docs/inject.md), carried to the
// ranks in COMMPROF_INJECT, and applied by each rank to itself: a Plan
// wraps the rank's communicator (delays) and transport (links), and
// starts helper processes (stalls, hogs).
package inject

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is what a fault does.
type Kind string

// Fault kinds.
const (
	// Delay holds rank Rank back for Dur before a collective call: before
	// every Every-th call, or before the first call after each Period.
	// The rank arrives late, as a rank with a slow data loader does.
	Delay Kind = "delay"
	// Stall stops rank Rank's whole process (SIGSTOP) for Dur every
	// Period and lets it go on (SIGCONT): compute, messages and all.
	Stall Kind = "stall"
	// Link slows the messages rank From sends to rank To: each waits
	// Latency more, and together they move at most Rate bytes a second.
	Link Kind = "link"
	// Hog runs Threads busy threads in a process beside rank Rank, both
	// pinned to one core, so the rank gets part of a core.
	Hog Kind = "hog"
)

// Fault is one injected fault.
type Fault struct {
	Kind     Kind
	Rank     int           // delay, stall, hog
	From, To int           // link
	Dur      time.Duration // delay, stall
	Every    int           // delay: before every Every-th collective (0: by Period)
	Period   time.Duration // delay (when Every is 0), stall
	Latency  time.Duration // link: added to each message
	Rate     float64       // link: bytes per second, 0 for no cap
	Threads  int           // hog
}

// String writes f in Parse's syntax.
func (f Fault) String() string {
	var kv []string
	add := func(k, v string) { kv = append(kv, k+"="+v) }
	switch f.Kind {
	case Delay:
		add("rank", strconv.Itoa(f.Rank))
		add("dur", f.Dur.String())
		if f.Every > 0 {
			add("every", strconv.Itoa(f.Every))
		} else {
			add("period", f.Period.String())
		}
	case Stall:
		add("rank", strconv.Itoa(f.Rank))
		add("dur", f.Dur.String())
		add("period", f.Period.String())
	case Link:
		add("from", strconv.Itoa(f.From))
		add("to", strconv.Itoa(f.To))
		if f.Latency > 0 {
			add("latency", f.Latency.String())
		}
		if f.Rate > 0 {
			add("rate", formatRate(f.Rate))
		}
	case Hog:
		add("rank", strconv.Itoa(f.Rank))
		add("threads", strconv.Itoa(f.Threads))
	}
	return string(f.Kind) + ":" + strings.Join(kv, ",")
}

// Describe says what f does, for a report.
func (f Fault) Describe() string {
	switch f.Kind {
	case Delay:
		if f.Every > 0 {
			if f.Every == 1 {
				return fmt.Sprintf("rank %d held back %v before every communication call", f.Rank, f.Dur)
			}
			return fmt.Sprintf("rank %d held back %v before every %d communication calls", f.Rank, f.Dur, f.Every)
		}
		return fmt.Sprintf("rank %d held back %v before a communication call every %v", f.Rank, f.Dur, f.Period)
	case Stall:
		return fmt.Sprintf("rank %d stopped for %v every %v", f.Rank, f.Dur, f.Period)
	case Link:
		var parts []string
		if f.Latency > 0 {
			parts = append(parts, fmt.Sprintf("%v more per message", f.Latency))
		}
		if f.Rate > 0 {
			parts = append(parts, "at most "+formatRate(f.Rate))
		}
		return fmt.Sprintf("messages from rank %d to rank %d slowed: %s", f.From, f.To, strings.Join(parts, ", "))
	case Hog:
		return fmt.Sprintf("rank %d shares its core with %d busy thread(s)", f.Rank, f.Threads)
	}
	return f.String()
}

// Ranks returns the ranks f involves.
func (f Fault) Ranks() []int {
	if f.Kind == Link {
		return []int{f.From, f.To}
	}
	return []int{f.Rank}
}

// Parse reads faults written as KIND:key=value,... and separated by ';'
// (or given one per --inject flag):
//
//	delay:rank=2,dur=20ms,every=1        rank 2 arrives 20 ms late at every collective
//	delay:rank=1,dur=50ms,period=500ms   ... at the first collective after each 500 ms
//	stall:rank=3,dur=30ms,period=300ms   rank 3's process stopped 30 ms every 300 ms
//	link:from=0,to=1,latency=2ms,rate=50MB/s
//	hog:rank=0,threads=1
func Parse(spec string) ([]Fault, error) {
	var out []Fault
	for _, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f, err := parseOne(part)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w", part, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseOne(s string) (Fault, error) {
	kind, rest, ok := strings.Cut(s, ":")
	f := Fault{Kind: Kind(strings.TrimSpace(kind)), Rank: -1, From: -1, To: -1}
	keys := map[Kind][]string{
		Delay: {"rank", "dur", "every", "period"},
		Stall: {"rank", "dur", "period"},
		Link:  {"from", "to", "latency", "rate"},
		Hog:   {"rank", "threads"},
	}[f.Kind]
	if keys == nil {
		return f, errors.New("want delay, stall, link or hog, then ':' and key=value pairs")
	}
	if !ok || strings.TrimSpace(rest) == "" {
		return f, fmt.Errorf("%s needs %s", f.Kind, strings.Join(keys, ", "))
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		known := false
		for _, kk := range keys {
			known = known || kk == k
		}
		if !ok || !known {
			return f, fmt.Errorf("%q: %s takes %s", kv, f.Kind, strings.Join(keys, ", "))
		}
		if seen[k] {
			return f, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "rank":
			f.Rank, err = nonNegInt(v)
		case "from":
			f.From, err = nonNegInt(v)
		case "to":
			f.To, err = nonNegInt(v)
		case "every":
			f.Every, err = nonNegInt(v)
			if err == nil && f.Every == 0 {
				err = errors.New("want at least 1")
			}
		case "threads":
			f.Threads, err = nonNegInt(v)
			if err == nil && (f.Threads < 1 || f.Threads > 64) {
				err = errors.New("want 1 to 64")
			}
		case "dur":
			f.Dur, err = positiveDur(v)
		case "period":
			f.Period, err = positiveDur(v)
		case "latency":
			f.Latency, err = positiveDur(v)
		case "rate":
			f.Rate, err = ParseRate(v)
		}
		if err != nil {
			return f, fmt.Errorf("%s=%s: %w", k, v, err)
		}
	}
	need := func(k string) error {
		if !seen[k] {
			return fmt.Errorf("%s needs %s=", f.Kind, k)
		}
		return nil
	}
	var err error
	switch f.Kind {
	case Delay:
		err = errors.Join(need("rank"), need("dur"))
		if err == nil && seen["every"] == seen["period"] {
			err = errors.New("delay needs one of every=N (collectives) or period=DURATION")
		}
	case Stall:
		err = errors.Join(need("rank"), need("dur"), need("period"))
		if err == nil && f.Dur >= f.Period {
			err = fmt.Errorf("dur=%v must be shorter than period=%v, or the rank never runs", f.Dur, f.Period)
		}
	case Link:
		err = errors.Join(need("from"), need("to"))
		if err == nil && !seen["latency"] && !seen["rate"] {
			err = errors.New("link needs latency= or rate= (or both)")
		}
		if err == nil && f.From == f.To {
			err = fmt.Errorf("from=%d and to=%d are one rank: a link joins two", f.From, f.To)
		}
	case Hog:
		err = need("rank")
		if f.Threads == 0 {
			f.Threads = 1
		}
	}
	return f, err
}

// Check reports a fault that names a rank the job does not have.
func Check(faults []Fault, size int) error {
	for _, f := range faults {
		for _, r := range f.Ranks() {
			if r >= size {
				return fmt.Errorf("fault %s names rank %d, but the job has %d ranks", f, r, size)
			}
		}
	}
	return nil
}

func nonNegInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New("want a whole number, 0 or more")
	}
	return n, nil
}

func positiveDur(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New("want a duration such as 20ms or 1.5s")
	}
	return d, nil
}

// ParseRate reads a rate such as 50MB/s, 400Mbit/s or 1.5GB/s (1 MB =
// 1e6 bytes) into bytes per second.
func ParseRate(v string) (float64, error) {
	s := strings.TrimSuffix(strings.TrimSpace(v), "/s")
	units := []struct {
		suffix string
		mult   float64
	}{{"Gbit", 1e9 / 8}, {"Mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || x <= 0 || x > 1e15 {
				break
			}
			return x * u.mult, nil
		}
	}
	return 0, errors.New("want a rate such as 50MB/s, 400Mbit/s or 1GB/s")
}

func formatRate(r float64) string {
	switch {
	case r >= 1e9:
		return strconv.FormatFloat(r/1e9, 'g', 4, 64) + "GB/s"
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'g', 4, 64) + "MB/s"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'g', 4, 64) + "kB/s"
	}
	return strconv.FormatFloat(r, 'g', 4, 64) + "B/s"
}

// Strings is the faults' specs, one per fault, as String writes them.
func Strings(faults []Fault) []string {
	var out []string
	for _, f := range faults {
		out = append(out, f.String())
	}
	return out
}

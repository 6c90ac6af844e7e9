package export

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// A track is one row of a rank's timeline: a thread in the trace-event
// model. Tracks are numbered in the order they are shown.
type track uint8

const (
	trackSteps track = iota + 1
	trackCompute
	trackCollectives
	trackSends
	trackRecvs
	trackMarks
	trackOther // events of a kind this package does not know
	numTracks
)

var trackNames = [numTracks]string{
	trackSteps:       "steps",
	trackCompute:     "compute",
	trackCollectives: "collectives",
	trackSends:       "sends",
	trackRecvs:       "recvs",
	trackMarks:       "marks",
	trackOther:       "other",
}

func trackOf(k trace.Kind) track {
	switch k {
	case trace.KindStep:
		return trackSteps
	case trace.KindCompute:
		return trackCompute
	case trace.KindCollective:
		return trackCollectives
	case trace.KindSend:
		return trackSends
	case trace.KindRecv:
		return trackRecvs
	case trace.KindMark:
		return trackMarks
	}
	return trackOther
}

// perfettoRank is what the Perfetto writer works out for one rank before
// writing: its events in start order and the lane of each.
type perfettoRank struct {
	rk    *trace.Rank
	order []int32  // event indices by start
	lane  []uint32 // by event index
	lanes [numTracks]int
}

// Perfetto writes run as Chrome trace-event JSON (the JSON object form),
// which the Perfetto UI (ui.perfetto.dev) and chrome://tracing open.
//
// Each rank is a process (pid rank+1: Perfetto reserves pid 0 for the
// kernel's idle task) named "rank N (host)". Its events are on threads,
// one per track: steps, compute, collectives, sends, recvs and marks.
// Slices on one thread must nest, so events of a track that overlap (two
// sends in flight at once) go to further threads of that track, "sends
// (2)" and so on. Spans are complete events ("X") with ts and dur in
// microseconds, exact to the nanosecond, and the event's fields in args;
// marks are instant events ("i") with their value. Each send that has a
// receive in the run (analyze.MatchMessages) gets a flow arrow from the
// send's slice to the receive's, category "message".
//
// The output is written as it is made, through a bufio.Writer; the
// writer keeps 8 bytes per event besides the run.
func Perfetto(w io.Writer, run *trace.Run) error {
	ranks := make([]perfettoRank, len(run.Ranks))
	byRank := make([][]trace.Event, 0, len(run.Ranks))
	loc := map[int32]int{} // rank -> index in ranks
	maxLanes := 1
	for i := range run.Ranks {
		rk := &run.Ranks[i]
		if rk.Info.Rank < 0 || rk.Info.Rank > 1<<24 {
			return fmt.Errorf("exporting rank %d: not a rank number", rk.Info.Rank)
		}
		pr := &ranks[i]
		pr.rk = rk
		pr.assignLanes()
		for _, n := range pr.lanes {
			maxLanes = max(maxLanes, n)
		}
		loc[int32(rk.Info.Rank)] = i
		for len(byRank) <= rk.Info.Rank {
			byRank = append(byRank, nil)
		}
		byRank[rk.Info.Rank] = rk.Events
	}
	// Thread ids are unique across the trace and readable: rank 2's second
	// sends thread is 3401 (pid 3, track 4, lane 1) when no track has more
	// than 100 lanes.
	laneCap := int64(100)
	for int64(maxLanes) > laneCap {
		laneCap *= 10
	}
	tid := func(rank int, tr track, lane uint32) int64 {
		return int64(rank+1)*10*laneCap + int64(tr)*laneCap + int64(lane)
	}

	bw := bufio.NewWriterSize(w, 256<<10)
	p := &perfettoWriter{w: bw}
	p.raw(`{"traceEvents":[`)
	for i := range ranks {
		pr := &ranks[i]
		rank := pr.rk.Info.Rank
		pid := int64(rank + 1)
		name := "rank " + strconv.Itoa(rank)
		if h := pr.rk.Info.Host; h != "" {
			name += " (" + h + ")"
		}
		p.meta(pid, tid(rank, 0, 0), "process_name", "name", name)
		p.metaInt(pid, tid(rank, 0, 0), "process_sort_index", int64(rank))
		for tr := trackSteps; tr < numTracks; tr++ {
			for lane := range pr.lanes[tr] {
				t := tid(rank, tr, uint32(lane))
				name := trackNames[tr]
				if lane > 0 {
					name += " (" + strconv.Itoa(lane+1) + ")"
				}
				p.meta(pid, t, "thread_name", "name", name)
				p.metaInt(pid, t, "thread_sort_index", int64(tr)*laneCap+int64(lane))
			}
		}
		for _, ix := range pr.order {
			e := &pr.rk.Events[ix]
			p.event(pid, tid(rank, trackOf(e.Kind), pr.lane[ix]), e)
			if p.err != nil {
				return p.err
			}
		}
	}

	links := analyze.MatchMessages(byRank)
	for id, l := range links {
		for j, end := range [2]analyze.EventRef{l.Send, l.Recv} {
			pr := &ranks[loc[end.Rank]]
			e := &pr.rk.Events[end.Index]
			p.flow(j == 1, int64(id+1), int64(end.Rank)+1, tid(int(end.Rank), trackOf(e.Kind), pr.lane[end.Index]), e)
		}
		if p.err != nil {
			return p.err
		}
	}

	p.raw("\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":")
	md, err := json.Marshal(perfettoMetadata(run, len(links)))
	if err != nil {
		return fmt.Errorf("encoding the trace's metadata: %w", err)
	}
	p.raw(string(md))
	p.raw("}\n")
	if p.err != nil {
		return p.err
	}
	return bw.Flush()
}

// assignLanes orders the rank's events by start and puts each on the first
// lane of its track that is free by then.
func (pr *perfettoRank) assignLanes() {
	evs := pr.rk.Events
	pr.order = make([]int32, len(evs))
	for i := range pr.order {
		pr.order[i] = int32(i)
	}
	slices.SortFunc(pr.order, func(a, b int32) int {
		ea, eb := &evs[a], &evs[b]
		if c := cmp.Compare(ea.Start, eb.Start); c != 0 {
			return c
		}
		if c := cmp.Compare(eb.Dur, ea.Dur); c != 0 { // the longer first
			return c
		}
		return cmp.Compare(a, b)
	})
	pr.lane = make([]uint32, len(evs))
	var ends [numTracks][]int64 // per track, the end of each lane's last slice
	for _, ix := range pr.order {
		e := &evs[ix]
		tr := trackOf(e.Kind)
		if tr == trackMarks { // instants overlap nothing
			pr.lanes[tr] = 1
			continue
		}
		end := e.Start + max(e.Dur, 0)
		lane := slices.IndexFunc(ends[tr], func(t int64) bool { return t <= e.Start })
		if lane < 0 {
			lane = len(ends[tr])
			ends[tr] = append(ends[tr], end)
		} else {
			ends[tr][lane] = end
		}
		pr.lane[ix] = uint32(lane)
	}
	for tr := range ends {
		if track(tr) != trackMarks {
			pr.lanes[tr] = len(ends[tr])
		}
	}
}

// perfettoWriter writes trace events, one per line. The first write error
// sticks and stops the rest.
type perfettoWriter struct {
	w     *bufio.Writer
	b     []byte
	comma bool // an event has been written: the next needs a comma
	err   error
}

func (p *perfettoWriter) raw(s string) {
	if p.err == nil {
		_, p.err = p.w.WriteString(s)
	}
}

// begin starts an event's object with the fields every phase has.
func (p *perfettoWriter) begin(ph string, pid, tid, ns int64) {
	p.b = p.b[:0]
	if p.comma {
		p.b = append(p.b, ',')
	}
	p.comma = true
	p.b = append(p.b, "\n{\"ph\":\""...)
	p.b = append(p.b, ph...)
	p.b = append(p.b, `","pid":`...)
	p.b = strconv.AppendInt(p.b, pid, 10)
	p.b = append(p.b, `,"tid":`...)
	p.b = strconv.AppendInt(p.b, tid, 10)
	p.b = append(p.b, `,"ts":`...)
	p.b = appendMicros(p.b, ns)
}

func (p *perfettoWriter) end() {
	p.b = append(p.b, '}')
	if p.err == nil {
		_, p.err = p.w.Write(p.b)
	}
}

func (p *perfettoWriter) key(k string) {
	p.b = append(p.b, ',', '"')
	p.b = append(p.b, k...)
	p.b = append(p.b, '"', ':')
}

func (p *perfettoWriter) str(k, v string) {
	p.key(k)
	p.b = appendJSONString(p.b, v)
}

func (p *perfettoWriter) num(k string, v int64) {
	p.key(k)
	p.b = strconv.AppendInt(p.b, v, 10)
}

// meta writes a metadata event whose one argument is a string.
func (p *perfettoWriter) meta(pid, tid int64, name, arg, v string) {
	p.begin("M", pid, tid, 0)
	p.str("name", name)
	p.b = append(p.b, `,"args":{`...)
	p.b = appendJSONString(p.b, arg)
	p.b = append(p.b, ':')
	p.b = appendJSONString(p.b, v)
	p.b = append(p.b, '}')
	p.end()
}

// metaInt writes a sort-index metadata event.
func (p *perfettoWriter) metaInt(pid, tid int64, name string, v int64) {
	p.begin("M", pid, tid, 0)
	p.str("name", name)
	p.b = append(p.b, `,"args":{"sort_index":`...)
	p.b = strconv.AppendInt(p.b, v, 10)
	p.b = append(p.b, '}')
	p.end()
}

// event writes one trace event: a complete event, or an instant for a mark.
func (p *perfettoWriter) event(pid, tid int64, e *trace.Event) {
	if e.Kind == trace.KindSample {
		// A counter reading: Perfetto draws each name as a counter track
		// of the rank's process (memory, CPU time over the run).
		p.begin("C", pid, tid, e.Start)
		p.str("name", e.Name)
		p.b = append(p.b, `,"args":{"value":`...)
		p.b = appendJSONFloat(p.b, e.Value)
		p.b = append(p.b, '}')
		p.end()
		return
	}
	mark := e.Kind == trace.KindMark
	if mark {
		p.begin("i", pid, tid, e.Start)
		p.b = append(p.b, `,"s":"t"`...)
	} else {
		p.begin("X", pid, tid, e.Start)
		p.b = append(p.b, `,"dur":`...)
		p.b = appendMicros(p.b, max(e.Dur, 0))
	}
	p.str("cat", e.Kind.String())
	p.key("name")
	p.b = append(p.b, '"')
	p.b = appendJSONChars(p.b, e.Name)
	switch e.Kind {
	case trace.KindSend:
		p.b = append(p.b, " to "...)
		p.b = strconv.AppendInt(p.b, int64(e.Peer), 10)
	case trace.KindRecv:
		p.b = append(p.b, " from "...)
		p.b = strconv.AppendInt(p.b, int64(e.Peer), 10)
	case trace.KindStep:
		if e.Step >= 0 {
			p.b = append(p.b, ' ')
			p.b = strconv.AppendInt(p.b, int64(e.Step), 10)
		}
	}
	p.b = append(p.b, '"')

	// args: the event's fields that mean something for its kind.
	p.b = append(p.b, `,"args":{"rank":`...)
	p.b = strconv.AppendInt(p.b, int64(e.Rank), 10)
	comm := e.Kind == trace.KindCollective || e.Kind == trace.KindSend || e.Kind == trace.KindRecv
	if comm || e.Bytes != 0 {
		p.num("bytes", e.Bytes)
	}
	if e.Peer >= 0 {
		p.num("peer", int64(e.Peer))
	}
	if e.Seq >= 0 {
		p.num("seq", e.Seq)
	}
	if e.Chunk >= 0 {
		p.num("chunk", int64(e.Chunk))
	}
	if e.Root >= 0 {
		p.num("root", int64(e.Root))
	}
	if e.Step >= 0 {
		p.num("step", int64(e.Step))
	}
	if e.Algo != "" {
		p.str("algo", e.Algo)
	}
	if e.DType != "" {
		p.str("dtype", e.DType)
	}
	if e.Comm != "" {
		p.str("comm", e.Comm)
	}
	if e.Kind == trace.KindRecv || e.Wait != 0 {
		p.num("wait_ns", e.Wait)
	}
	if mark || e.Value != 0 {
		p.key("value")
		p.b = appendJSONFloat(p.b, e.Value)
	}
	p.b = append(p.b, '}')
	p.end()
}

// flow writes one end of a message's arrow, inside the event's slice
// (halfway) so that viewers bind it to that slice.
func (p *perfettoWriter) flow(finish bool, id, pid, tid int64, e *trace.Event) {
	ts := e.Start + max(e.Dur, 0)/2
	if finish {
		p.begin("f", pid, tid, ts)
		p.b = append(p.b, `,"bp":"e"`...)
	} else {
		p.begin("s", pid, tid, ts)
	}
	p.num("id", id)
	p.str("cat", "message")
	p.str("name", e.Name)
	p.end()
}

// perfettoMetadata is the trace's "metadata" object: what the run was.
func perfettoMetadata(run *trace.Run, messages int) map[string]any {
	md := map[string]any{
		"exporter": "commprof export",
		"run_dir":  run.Dir,
		"ranks":    len(run.Ranks),
		"events":   run.NumEvents(),
		"messages": messages,
	}
	if m := run.Manifest; m != nil {
		md["run_id"] = m.RunID
		md["name"] = m.Name
		md["world_size"] = m.WorldSize
		md["commprof_version"] = m.CommprofVersion
		md["status"] = m.Status
		md["command"] = m.Command
		md["config"] = m.Config
		md["clock_method"] = m.Clock.Method
		md["clock_uncertainty_ns"] = m.Clock.UncertaintyNS
		if !m.Start.IsZero() {
			md["start"] = m.Start.UTC().Format(time.RFC3339Nano)
		}
	}
	if len(run.Problems) > 0 {
		probs := make([]string, len(run.Problems))
		for i, err := range run.Problems {
			probs[i] = err.Error()
		}
		md["problems"] = probs
	}
	return md
}

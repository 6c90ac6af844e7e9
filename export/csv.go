package export

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"io"
	"slices"
	"strconv"

	"github.com/commprof/commprof/trace"
)

// CSVColumns are the header of the CSV export: every column of the trace,
// named as in the trace format.
var CSVColumns = []string{trace.ColRank, trace.ColKind, trace.ColName, trace.ColStart, trace.ColDur, trace.ColBytes,
	trace.ColPeer, trace.ColSeq, trace.ColStep, trace.ColAlgo, trace.ColDType, trace.ColRoot, trace.ColChunk,
	trace.ColComm, trace.ColWait, trace.ColValue, trace.ColLabel}

// CSV writes every event of run as CSV (RFC 4180): a header row of
// CSVColumns and one row per event, every rank merged in order of start
// time on the aligned clock (ties in rank order, then as recorded).
func CSV(w io.Writer, run *trace.Run) error {
	type ref struct{ rank, index int32 }
	refs := make([]ref, 0, run.NumEvents())
	for i := range run.Ranks {
		for j := range run.Ranks[i].Events {
			refs = append(refs, ref{int32(i), int32(j)})
		}
	}
	ev := func(r ref) *trace.Event { return &run.Ranks[r.rank].Events[r.index] }
	slices.SortStableFunc(refs, func(a, b ref) int {
		ea, eb := ev(a), ev(b)
		if c := cmp.Compare(ea.Start, eb.Start); c != 0 {
			return c
		}
		return cmp.Compare(ea.Rank, eb.Rank)
	})
	bw := bufio.NewWriterSize(w, 256<<10)
	c := newCSVWriter(bw)
	for _, r := range refs {
		c.write(ev(r))
	}
	if err := c.close(); err != nil {
		return err
	}
	return bw.Flush()
}

// CSVEvents writes evs as CSV in the order given: the header row of
// CSVColumns, then one row per event.
func CSVEvents(w io.Writer, evs []trace.Event) error {
	c := newCSVWriter(w)
	for i := range evs {
		c.write(&evs[i])
	}
	return c.close()
}

// csvWriter writes events as CSV rows, reusing one record. The first
// error sticks.
type csvWriter struct {
	w   *csv.Writer
	rec []string
	err error
}

func newCSVWriter(w io.Writer) *csvWriter {
	c := &csvWriter{w: csv.NewWriter(w), rec: make([]string, len(CSVColumns))}
	c.err = c.w.Write(CSVColumns)
	return c
}

func (c *csvWriter) write(e *trace.Event) {
	if c.err != nil {
		return
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	r := c.rec
	r[0], r[1], r[2], r[3], r[4], r[5] = i(int64(e.Rank)), e.Kind.String(), e.Name, i(e.Start), i(e.Dur), i(e.Bytes)
	r[6], r[7], r[8], r[9], r[10] = i(int64(e.Peer)), i(e.Seq), i(int64(e.Step)), e.Algo, e.DType
	r[11], r[12], r[13], r[14] = i(int64(e.Root)), i(int64(e.Chunk)), e.Comm, i(e.Wait)
	r[15], r[16] = strconv.FormatFloat(e.Value, 'g', -1, 64), e.Label
	c.err = c.w.Write(r)
}

func (c *csvWriter) close() error {
	if c.err != nil {
		return c.err
	}
	c.w.Flush()
	return c.w.Error()
}

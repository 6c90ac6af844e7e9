package export

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// parseRow reads a CSV row back into an event.
func parseRow(t *testing.T, row []string) trace.Event {
	t.Helper()
	i := func(s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("row %q: %v", row, err)
		}
		return v
	}
	k, err := trace.ParseKind(row[1])
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(row[15], 64)
	if err != nil {
		t.Fatal(err)
	}
	return trace.Event{Rank: int32(i(row[0])), Kind: k, Name: row[2], Start: i(row[3]), Dur: i(row[4]), Bytes: i(row[5]),
		Peer: int32(i(row[6])), Seq: i(row[7]), Step: int32(i(row[8])), Algo: row[9], DType: row[10], Root: int32(i(row[11])),
		Chunk: int32(i(row[12])), Comm: row[13], Wait: i(row[14]), Value: v, Label: row[16]}
}

func TestExportCSV(t *testing.T) {
	run := testRun()
	var buf bytes.Buffer
	if err := CSV(&buf, run); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows[0], CSVColumns) || len(CSVColumns) != 17 || CSVColumns[3] != "start_ns" {
		t.Fatalf("header %q", rows[0])
	}
	var got, want []trace.Event
	for _, r := range rows[1:] {
		got = append(got, parseRow(t, r))
	}
	for _, rk := range run.Ranks {
		want = append(want, rk.Events...)
	}
	// Every event once, in start order, ties by rank then as recorded.
	slices.SortStableFunc(want, func(a, b trace.Event) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return int(a.Rank - b.Rank)
	})
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n got %+v\nwant %+v", got, want)
	}
	if !slices.ContainsFunc(got, func(e trace.Event) bool { return e.Name == nasty }) {
		t.Error("the nasty name did not survive")
	}
}

func TestExportCSVEvents(t *testing.T) {
	evs := testRun().Ranks[1].Events
	var buf bytes.Buffer
	if err := CSVEvents(&buf, evs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(evs)+1 {
		t.Fatalf("%d rows for %d events", len(rows), len(evs))
	}
	for i, r := range rows[1:] {
		if e := parseRow(t, r); e != evs[i] {
			t.Errorf("row %d: %+v, want %+v (the order given)", i, e, evs[i])
		}
	}
	buf.Reset()
	if err := CSVEvents(&buf, nil); err != nil || buf.String() != strings.Join(CSVColumns, ",")+"\n" {
		t.Errorf("no events: %q, %v", buf.String(), err)
	}
}

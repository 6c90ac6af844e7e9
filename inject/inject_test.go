package inject

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/commprof/commprof/collectives"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Fault
	}{
		{"delay:rank=2,dur=20ms,every=1", []Fault{{Kind: Delay, Rank: 2, From: -1, To: -1, Dur: 20 * time.Millisecond, Every: 1}}},
		{" delay:rank=0, dur=1s, period=5s ; link:from=1,to=0,latency=2ms,rate=400Mbit/s", []Fault{
			{Kind: Delay, Rank: 0, From: -1, To: -1, Dur: time.Second, Period: 5 * time.Second},
			{Kind: Link, Rank: -1, From: 1, To: 0, Latency: 2 * time.Millisecond, Rate: 50e6}}},
		{"stall:rank=3,dur=30ms,period=300ms", []Fault{{Kind: Stall, Rank: 3, From: -1, To: -1, Dur: 30 * time.Millisecond, Period: 300 * time.Millisecond}}},
		{"hog:rank=1", []Fault{{Kind: Hog, Rank: 1, From: -1, To: -1, Threads: 1}}},
		{"hang:rank=1,at=6; kill:rank=2,at=1", []Fault{{Kind: Hang, Rank: 1, From: -1, To: -1, At: 6}, {Kind: Kill, Rank: 2, From: -1, To: -1, At: 1}}},
		{"mismatch:rank=3,at=4", []Fault{{Kind: Mismatch, Rank: 3, From: -1, To: -1, At: 4, Call: MismatchBroadcast}}},
		{"mismatch:rank=0,at=2,call=half", []Fault{{Kind: Mismatch, Rank: 0, From: -1, To: -1, At: 2, Call: MismatchHalf}}},
		{"", nil},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Parse(%q)[%d] = %+v, want %+v", tc.in, i, got[i], tc.want[i])
			}
			again, err := Parse(got[i].String())
			if err != nil || len(again) != 1 || again[0] != got[i] {
				t.Errorf("%q does not parse back to itself: %v %v", got[i].String(), again, err)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"slow:rank=1":                        "want delay, stall, link, hog, hang, mismatch or kill",
		"hang:rank=1":                        "hang needs at=",
		"hang:rank=1,at=0":                   "at least 1",
		"mismatch:rank=1,at=2,call=gather":   "want broadcast, barrier, allreduce or half",
		"kill:at=3":                          "kill needs rank=",
		"delay:rank=1,dur=20ms":              "one of every=N",
		"delay:rank=1,dur=20ms,every=0":      "at least 1",
		"delay:rank=-1,dur=20ms,every=1":     "whole number",
		"delay:rank=1,dur=fast,every=1":      "duration such as",
		"delay:rank=1,rank=2,dur=1s,every=1": "given twice",
		"stall:rank=1,dur=1s,period=1s":      "shorter than period",
		"link:from=1,to=1,rate=1MB/s":        "one rank",
		"link:from=0,to=1":                   "latency= or rate=",
		"link:from=0,to=1,rate=fast":         "rate such as",
		"hog:rank=0,threads=100":             "1 to 64",
		"delay:rank=1,dur=1s,colour=red":     "delay takes rank, dur, every, period",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", in, err, want)
		}
	}
	fs, _ := Parse("delay:rank=4,dur=1s,every=1")
	if err := Check(fs, 4); err == nil || !strings.Contains(err.Error(), "rank 4, but the job has 4 ranks") {
		t.Errorf("Check: %v", err)
	}
}

func TestForRank(t *testing.T) {
	fs, err := Parse("delay:rank=1,dur=1ms,every=1;link:from=1,to=0,latency=1ms;link:from=0,to=1,latency=1ms;hog:rank=2")
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range []int{1, 2, 1, 0} {
		if got := len(ForRank(fs, r).Faults); got != want {
			t.Errorf("rank %d applies %d faults, want %d", r, got, want)
		}
	}
}

// TestLinkPaces sends over a capped link and checks the time the messages
// took against the cap: 8 messages of 64 KiB at 4 MB/s take 131 ms.
func TestLinkPaces(t *testing.T) {
	ctx := context.Background()
	ts := collectives.NewLocal(2)
	defer ts[0].Close()
	defer ts[1].Close()
	const n, size, rate = 8, 64 << 10, 4e6
	fs, _ := Parse("link:from=0,to=1,rate=4MB/s")
	slow := ForRank(fs, 0).WrapTransport(ts[0])
	if ForRank(fs, 1).WrapTransport(ts[1]) != ts[1] {
		t.Error("rank 1 has no slow link but its transport was wrapped")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, size)
		for i := range n {
			if _, err := collectives.Recv(ctx, ts[1], 0, collectives.Header{Op: collectives.OpSendRecv, Seq: uint64(i)}, buf); err != nil {
				t.Error(err)
			}
		}
	}()
	t0 := time.Now()
	for i := range n {
		if err := slow.Send(ctx, 1, collectives.Header{Op: collectives.OpSendRecv, Seq: uint64(i)}, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	took := time.Since(t0)
	want := time.Duration(n * size / rate * 1e9)
	// The cap is a floor: a loaded machine may only make it slower.
	if took < want*95/100 {
		t.Errorf("%d messages of %d bytes at %.0f B/s took %v, want at least %v", n, size, rate, took, want)
	}
}

// TestDelayEvery counts the delays and their marks over a run of calls.
func TestDelayEvery(t *testing.T) {
	ctx := context.Background()
	ts := collectives.NewLocal(1)
	defer ts[0].Close()
	c, err := collectives.New(ts[0], collectives.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := Parse("delay:rank=0,dur=2ms,every=3")
	var marks []float64
	d := ForRank(fs, 0).WrapComm(c, func(name string, v float64) {
		if name != MarkDelay {
			t.Errorf("mark %q", name)
		}
		marks = append(marks, v)
	})
	t0 := time.Now()
	for range 9 {
		if err := d.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.IAllReduce(ctx, collectives.NewBuffer(collectives.Float32, 4), collectives.Sum).Wait(); err != nil {
		t.Fatal(err)
	}
	if len(marks) != 3 || marks[0] != 2e6 {
		t.Errorf("marks %v, want three of 2e6 ns", marks)
	}
	if took := time.Since(t0); took < 6*time.Millisecond {
		t.Errorf("9 calls with a 2 ms delay every 3rd took %v", took)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	fs, _ = Parse("delay:rank=0,dur=1h,every=1")
	if err := ForRank(fs, 0).WrapComm(c, nil).IAllReduce(cctx, collectives.NewBuffer(collectives.Float32, 4), collectives.Sum).Wait(); err == nil {
		t.Error("a delayed call whose context ended did not fail")
	}
}

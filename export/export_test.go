package export

import (
	"errors"
	"time"

	"github.com/commprof/commprof/trace"
)

// nasty is a name from a trace that no output may break on.
const nasty = "\"</script><script>alert(1)</script>\\ \n\t\x01\x7f \u2028\u2029 <!-- & bad\xff utf-8 ü"

// ev builds an event with the "none" values of the fields it does not set.
func ev(rank int32, kind trace.Kind, name string, start, dur int64) trace.Event {
	return trace.Event{Rank: rank, Kind: kind, Name: name, Start: start, Dur: dur, Peer: -1, Seq: -1, Step: -1, Root: -1, Chunk: -1}
}

// message builds one side of an allreduce's message.
func message(rank int32, kind trace.Kind, peer int32, seq int64, chunk int32, start, dur, bytes int64) trace.Event {
	e := ev(rank, kind, "allreduce", start, dur)
	e.Peer, e.Seq, e.Chunk, e.Bytes, e.Step = peer, seq, chunk, bytes, 0
	e.Algo, e.DType, e.Comm = "ring", "float32", "world"
	return e
}

// testRun is a hand-built run of three ranks of which rank 2 left no
// stream: five messages between ranks 0 and 1 pair up, rank 0's send to
// rank 2 and its receive from it do not. Rank 0's events are listed out
// of order, and two of its sends overlap in time, so that a message's
// arrow starts on a second sends thread.
func testRun() *trace.Run {
	r0 := []trace.Event{
		message(0, trace.KindSend, 1, 0, 0, 41_000, 1_500, 2048),
		message(0, trace.KindRecv, 1, 0, 0, 41_000, 5_123, 2048),
		message(0, trace.KindSend, 1, 0, 1, 47_000, 999, 2048),
		message(0, trace.KindRecv, 1, 0, 1, 47_000, 2_001, 2048),
		message(0, trace.KindSend, 2, 1, 0, 60_000, 5_000, 1<<20), // rank 2 is gone
		message(0, trace.KindSend, 1, 1, 0, 61_000, 5_000, 1<<20), // overlaps it: on a second thread
		message(0, trace.KindRecv, 2, 1, 1, 61_500, 9_000, 1<<20), // never sent
		ev(0, trace.KindCompute, "forward", 2_000, 30_000),
		ev(0, trace.KindCompute, nasty, 33_000, 1_000),
	}
	r0[1].Wait = 1_000
	step := ev(0, trace.KindStep, "step", 1_000, 100_000)
	step.Step = 0
	coll := ev(0, trace.KindCollective, "allreduce", 40_000, 50_000)
	coll.Bytes, coll.Seq, coll.Step, coll.Algo, coll.DType, coll.Comm = 4096, 0, 0, "ring", "float32", "world"
	mark := ev(0, trace.KindMark, "test_accuracy", 99_000, 0)
	mark.Value = 0.875
	r0 = append([]trace.Event{coll, mark}, r0...)
	r0 = append(r0, step)

	r1 := []trace.Event{
		message(1, trace.KindSend, 0, 0, 0, 40_500, 1_600, 2048),
		message(1, trace.KindRecv, 0, 0, 0, 41_500, 1_200, 2048),
		message(1, trace.KindRecv, 0, 0, 1, 47_100, 800, 2048),
		message(1, trace.KindSend, 0, 0, 1, 46_000, 1_000, 2048),
		message(1, trace.KindRecv, 0, 1, 0, 62_000, 4_000, 1<<20),
	}
	r1[1].Wait = 300
	c1 := coll
	c1.Rank, c1.Start, c1.Dur = 1, 40_400, 49_000
	r1 = append(r1, c1)

	return &trace.Run{
		Dir: "runs/test",
		Manifest: &trace.Manifest{FormatVersion: 1, RunID: "test-1", Name: "test </script>", WorldSize: 3,
			Command: []string{"commprof", "record", "--", "bench", "allreduce"}, Status: trace.StatusFailed,
			Start: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC), Config: map[string]string{"op": "allreduce"}},
		Ranks: []trace.Rank{
			{Info: trace.RankInfo{Rank: 0, WorldSize: 3, Host: "node-a"}, File: trace.RankFile(0), Events: r0},
			{Info: trace.RankInfo{Rank: 1, WorldSize: 3, Host: `node"b`}, File: trace.RankFile(1), Events: r1},
		},
		Problems: []error{errors.New("rank 2 has no stream in runs/test")},
	}
}

// matched is how many messages of testRun pair up.
const matched = 5

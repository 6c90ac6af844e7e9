package analyze

import (
	"sort"
)

// P2PStats sums the program's own point-to-point messages (Send and
// Recv rather than collectives: a parameter server's pushes and pulls).
// Messages a rank sends itself are local copies and not counted here.
type P2PStats struct {
	Messages int64 `json:"messages"` // received
	Bytes    int64 `json:"bytes"`    // received
	// TimeNS is the ranks' time in point-to-point calls (sum over ranks of
	// the union of their send and recv spans); Share is it over all
	// communication time.
	TimeNS int64   `json:"time_ns"`
	Share  float64 `json:"share"`
	// Hubs are the ranks that receive from two or more others, most bytes
	// first: parameter servers and the like.
	Hubs []Hub `json:"hubs"`
}

// Hub is one rank that many others send to.
type Hub struct {
	Rank  int   `json:"rank"`
	Peers int   `json:"peers"`
	Bytes int64 `json:"bytes"` // received from the others
	// PerStepBytes is Bytes per training step (0 without steps).
	PerStepBytes float64 `json:"per_step_bytes"`
	// TransferNS is its receives' time after the first byte arrived, and
	// GBps the incoming bandwidth over it; WaitNS the time its receives
	// spent waiting for the senders.
	TransferNS int64   `json:"transfer_ns"`
	WaitNS     int64   `json:"wait_ns"`
	GBps       float64 `json:"gbps"`
}

// pointToPoint sums the program's point-to-point messages.
func pointToPoint(ranks []*RankSummarizer, sp []rankSpans, steps int) P2PStats {
	var out P2PStats
	out.Hubs = []Hub{}
	var comm int64
	for _, rs := range ranks {
		comm += sp[rs.rank].comm.length()
		out.TimeNS += rs.p2pSeq.length()
		h := Hub{Rank: rs.rank}
		peers := map[int32]bool{}
		for m := range rs.msgs.all() {
			if m.send || int(m.peer) == rs.rank {
				continue
			}
			out.Messages++
			out.Bytes += m.bytes
			peers[m.peer] = true
			h.Bytes += m.bytes
			h.TransferNS += m.end - m.start - m.wait
			h.WaitNS += m.wait
		}
		h.Peers = len(peers)
		if h.Peers >= 2 {
			if h.TransferNS > 0 {
				h.GBps = float64(h.Bytes) / float64(h.TransferNS)
			}
			if steps > 0 {
				h.PerStepBytes = float64(h.Bytes) / float64(steps)
			}
			out.Hubs = append(out.Hubs, h)
		}
	}
	if comm > 0 {
		out.Share = float64(out.TimeNS) / float64(comm)
	}
	sort.SliceStable(out.Hubs, func(i, j int) bool { return out.Hubs[i].Bytes > out.Hubs[j].Bytes })
	return out
}

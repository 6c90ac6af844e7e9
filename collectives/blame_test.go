package collectives

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestBlamedRankReadsThisPackagesErrors checks BlamedRank against the
// errors this package makes, so that a change of their words fails here.
func TestBlamedRankReadsThisPackagesErrors(t *testing.T) {
	// A port nobody listens on: rank 1 cannot reach rank 0 there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, dialErr := connectMesh(ctx, 1, own, []Peer{{Addr: closed, Host: "n0"}, {Addr: own.Addr().String(), Host: "n1"}}, [32]byte{}, nil)
	if dialErr == nil {
		t.Fatal("rank 1 reached rank 0 at a closed port")
	}
	aborted := &PeerError{Rank: 3, Reporter: 0, Reason: "aborted", Err: &PeerError{Rank: 7, Reporter: -1, Reason: "connection closed (the process exited or was killed)"}}
	for _, tc := range []struct {
		msg        string
		self, want int
	}{
		{fmt.Sprintf("commprof: rank 1: joining: %v", dialErr), 1, 0},
		{fmt.Sprintf("commprof: rank 0: allreduce #4: %v", &PeerError{Rank: 2, Reporter: -1, Reason: "connection closed"}), 0, 2},
		{fmt.Sprintf("commprof: rank 0: barrier #9: %v", aborted), 0, 7}, // the deepest cause
		{fmt.Sprintf("commprof: rank 2: %v", &PeerError{Rank: 2, Reporter: -1, Reason: "interrupted in the middle of a message to rank 0", Err: context.Canceled}), 2, -1},
		{"commprof: rank 3: collective mismatch in broadcast #3 on communicator 0: rank 2 called allreduce", 3, -1},
		{"commprof: rank 9: rank 4 at 10.0.0.2:40123 (host n2) dropped the connection while it was being set up (did it exit?): EOF", 9, 4},
		{"RuntimeError: Connection closed by peer [10.0.0.2]:4012", 4, -1},
	} {
		if got := BlamedRank(tc.msg, tc.self); got != tc.want {
			t.Errorf("BlamedRank(%q, %d) = %d, want %d", tc.msg, tc.self, got, tc.want)
		}
	}
}

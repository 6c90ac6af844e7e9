package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Comm: 0xdeadbeef, Seq: 1<<40 + 7, Op: OpReduceScatter, Algo: AlgoRabenseifner, DType: Float64, Chunk: -3}
	var b [hdrLen]byte
	putHeader(b[:], frameData, h, 12345)
	typ, got, n, ok := parseHeader(b[:])
	if !ok || typ != frameData || got != h || n != 12345 {
		t.Fatalf("round trip: %v %v %+v %d", ok, typ, got, n)
	}
	b[0] = 0
	if _, _, _, ok := parseHeader(b[:]); ok {
		t.Fatal("bad magic accepted")
	}
}

// pair returns two connected loopback TCP connections, closed when the
// test ends.
func pair(t testing.TB) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// peerSends connects a transport (rank 0 of 3, with no connection to rank
// 2) to a fake rank 1 that writes raw bytes and hangs up, then posts one
// receive from it.
func peerSends(t testing.TB, raw []byte, want Header, size int) ([]byte, error) {
	fake, ours := pair(t)
	tr, err := NewTCP(0, []*net.TCPConn{nil, ours, nil}, TCPConfig{PeerTimeout: 5 * time.Second, MaxUnexpected: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	go func() {
		_, _ = fake.Write(raw)
		fake.Close()
	}()
	buf := make([]byte, size)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Recv(ctx, tr, 1, want, buf)
	if ctx.Err() != nil {
		t.Fatalf("receive hung on input %x", raw)
	}
	return buf, err
}

func frame(typ byte, h Header, payload []byte) []byte {
	b := make([]byte, hdrLen+len(payload))
	putHeader(b, typ, h, len(payload))
	copy(b[hdrLen:], payload)
	return b
}

var fuzzHeader = Header{Comm: 0, Seq: 3, Op: OpAllReduce, Algo: AlgoRing, DType: Float32, Chunk: 1}

func TestPeerFrames(t *testing.T) {
	payload := []byte("0123456789abcdef")
	abort := make([]byte, 4+len("out of memory"))
	binary.LittleEndian.PutUint32(abort, 2)
	copy(abort[4:], "out of memory")
	other := fuzzHeader
	other.Seq = 4
	for _, tc := range []struct {
		name   string
		raw    []byte
		want   string // "" means the receive succeeds
		isPeer bool
	}{
		{"data", frame(frameData, fuzzHeader, payload), "", false},
		{"heartbeat then data", append(frame(frameHeartbeat, Header{}, nil), frame(frameData, fuzzHeader, payload)...), "", false},
		{"another collective first", append(frame(frameData, other, payload), frame(frameData, fuzzHeader, payload)...), "", false},
		{"hang-up", nil, "rank 1 failed: connection closed", true},
		{"cut header", frame(frameData, fuzzHeader, payload)[:20], "rank 1 failed: connection closed", true},
		{"cut payload", frame(frameData, fuzzHeader, payload)[:40], "rank 1 failed: connection closed", true},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n....."), "malformed frame", true},
		{"abort", frame(frameAbort, Header{}, abort), "rank 2 failed: out of memory (reported by rank 1)", true},
		{"abort naming no rank", frame(frameAbort, Header{}, []byte{9, 0, 0, 0}), "malformed frame", true},
		{"huge unexpected message", func() []byte {
			b := frame(frameData, other, nil)
			binary.LittleEndian.PutUint64(b[24:], 1<<39)
			return b
		}(), "before this rank posted its receive", true},
		{"bye", frame(frameBye, Header{}, nil), "rank 1 failed: closed its transport", true},
		{"wrong size", frame(frameData, fuzzHeader, payload[:8]), "size mismatch", false},
		{"wrong op", frame(frameData, Header{Seq: 3, Op: OpBroadcast, Algo: AlgoRing, DType: Float32, Chunk: 1}, payload), "rank 1 called broadcast", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := peerSends(t, tc.raw, fuzzHeader, len(payload))
			if tc.want == "" {
				if err != nil || string(got) != string(payload) {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			var pe *PeerError
			if tc.isPeer != errors.As(err, &pe) {
				t.Fatalf("error %v: PeerError %v, want %v", err, !tc.isPeer, tc.isPeer)
			}
		})
	}
}

// FuzzPeerBytes feeds arbitrary bytes from a peer to the TCP reader: a
// receive must complete or fail, never panic or hang.
func FuzzPeerBytes(f *testing.F) {
	f.Add(frame(frameData, fuzzHeader, make([]byte, 16)))
	f.Add(frame(frameHeartbeat, Header{}, nil))
	f.Add(frame(frameAbort, Header{}, []byte{1, 0, 0, 0, 'x'}))
	f.Add(frame(frameBye, Header{}, nil))
	f.Add(frame(frameData, fuzzHeader, nil)[:hdrLen-1])
	huge := frame(frameData, fuzzHeader, nil)
	binary.LittleEndian.PutUint64(huge[24:], 1<<62)
	f.Add(huge)
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = peerSends(t, raw, fuzzHeader, 16)
	})
}

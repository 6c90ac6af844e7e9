package collectives

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// TransportMode says how the ranks of one machine reach each other
// (COMMPROF_TRANSPORT). Ranks on different machines always use TCP.
type TransportMode uint8

// Transport modes.
const (
	// TransportAuto links ranks of one machine through shared memory where
	// it can be set up, and through TCP where it cannot.
	TransportAuto TransportMode = iota
	// TransportTCP links every pair through TCP, as commprof did before it
	// had shared memory.
	TransportTCP
	// TransportShm links ranks of one machine through shared memory, and
	// fails the join, saying why, when a pair of them cannot be.
	TransportShm
)

var transportNames = [...]string{TransportAuto: "auto", TransportTCP: "tcp", TransportShm: "shm"}

func (m TransportMode) String() string {
	if int(m) < len(transportNames) {
		return transportNames[m]
	}
	return fmt.Sprintf("TransportMode(%d)", uint8(m))
}

// ParseTransportMode reads a COMMPROF_TRANSPORT value: auto (or empty),
// tcp or shm.
func ParseTransportMode(v string) (TransportMode, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "auto":
		return TransportAuto, nil
	case "tcp":
		return TransportTCP, nil
	case "shm":
		return TransportShm, nil
	}
	return TransportAuto, fmt.Errorf("%s=%q: want auto, shm or tcp", envnames.Transport, v)
}

// ShmConfig tunes the shared-memory links.
type ShmConfig struct {
	// Spin is how long a rank with nothing to do may poll its links
	// before it sleeps until a peer wakes it. Zero means 50 µs. A rank
	// that polls yields its core at every turn after the first 5 µs (from
	// the first turn when the machine's ranks outnumber its cores), so
	// that it does not keep the core from the rank it waits for or from
	// the program's computation; and it polls only while polling pays:
	// when its recent polls mostly ran out of time, or a yield kept the
	// core away for over a millisecond, its waits sleep at once, one in
	// 16 polling to learn whether polling pays again
	// (docs/collectives.md). Negative: never.
	Spin time.Duration
	// RingBytes is the size of each direction's ring, a power of two
	// (default 1 MiB; 256 KiB when a machine has more than 16 ranks, and
	// less where its pairs' rings would take more than an eighth of its
	// memory or 1 GiB: 16 KiB at 256 ranks, 4 KiB at 512).
	RingBytes int
	// CopyOnceMin is the smallest message the receiver copies straight
	// from the sender's memory, once, instead of through the ring. Zero
	// decides by the machine, measured at set-up: never where the kernel
	// copies between processes more slowly than memcpy (the ring's two
	// copies then cost less); otherwise 1 MiB when its ranks have a core
	// each, 512 KiB when they outnumber its cores (a message through the
	// ring costs a second copy, but no round trip: its Send returns before
	// the receiver has run; docs/collectives.md). Negative: never.
	CopyOnceMin int
}

// Defaults of ShmConfig.
const (
	defaultShmSpin               = 50 * time.Microsecond
	defaultShmRing               = 1 << 20
	defaultShmCopyOnceMin        = 1 << 20
	defaultShmCopyOnceMinCrowded = 512 << 10
)

// machineID says which ranks can share memory: those of one user on one
// running kernel (its boot id) in one network namespace (the abstract
// Unix sockets the segments are handed over are per network namespace)
// with one host name. Ranks that a launcher or a test puts in separate
// network or UTS namespaces to stand for separate hosts are treated as
// separate hosts, as the analyses (which group ranks by host name) treat
// them. It is a hash: the roster does not carry the boot id. "" means
// this process cannot tell, and offers no shared memory.
func machineID(hostname string) string {
	parts, err := machineParts()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte("commprof-machine\x00" + parts + "\x00" + hostname))
	return hex.EncodeToString(sum[:12])
}

// Mesh is the transport Join returns: shared memory to the peers on this
// rank's machine (when the mode allows and it could be set up), TCP to
// the others, behind the one Transport. Its guarantees are TCP's: messages
// match by (Comm, Seq) in order, a peer that fails fails every pending and
// later call with a *PeerError naming it, whichever link noticed, and
// Abort and Close reach every peer.
type Mesh struct {
	rank, size int
	tcp        *TCP
	shm        *shmTransport // nil when no peer is reached through shared memory
	viaShm     []bool
	fallback   error // why peers that could share memory are reached through TCP
}

var _ Transport = (*Mesh)(nil)

// newMesh puts tcp and shm (not started yet; nil, or without links, when
// no peer is reached through shared memory) behind one transport, and
// starts shm.
func newMesh(tcp *TCP, shm *shmTransport) *Mesh {
	m := &Mesh{rank: tcp.rank, size: tcp.size, tcp: tcp, viaShm: make([]bool, tcp.size)}
	if shm != nil {
		m.fallback = shm.fallback
		if len(shm.active) == 0 {
			shm = nil
		}
	}
	m.shm = shm
	if shm != nil {
		for r := range m.viaShm {
			m.viaShm[r] = shm.links[r] != nil
		}
		// A failure seen on either side fails the other too, which tells
		// its own peers: the job stops with one culprit everywhere.
		shm.onFail = m.fail
		f := m.fail
		tcp.onFail.Store(&f)
		shm.start()
		var pe *PeerError
		if err := tcp.err(); errors.As(err, &pe) {
			m.fail(pe) // TCP failed before it could tell
		}
	}
	return m
}

func (m *Mesh) fail(pe *PeerError) {
	m.tcp.fail(pe)
	if m.shm != nil {
		m.shm.fail(pe)
	}
}

// Rank implements Transport.
func (m *Mesh) Rank() int { return m.rank }

// Size implements Transport.
func (m *Mesh) Size() int { return m.size }

// Send implements Transport.
func (m *Mesh) Send(ctx context.Context, to int, h Header, p []byte) error {
	if to >= 0 && to < m.size && m.viaShm[to] {
		if err := ctx.Err(); err != nil {
			return err
		}
		return m.shm.send(ctx, to, h, p)
	}
	return m.tcp.Send(ctx, to, h, p)
}

// Post implements Transport.
func (m *Mesh) Post(from int, h Header, p []byte) Receive {
	if from >= 0 && from < m.size && m.viaShm[from] {
		return m.shm.links[from].box.post(h, p)
	}
	return m.tcp.Post(from, h, p)
}

// Link says how this rank reaches peer: "shm", "tcp", or "self".
func (m *Mesh) Link(peer int) string {
	switch {
	case peer == m.rank:
		return "self"
	case peer >= 0 && peer < m.size && m.viaShm[peer]:
		return "shm"
	}
	return "tcp"
}

// Describe says how this rank reaches its peers, for benchmark headers:
// how many through shared memory and how many through TCP, how, and why
// none through shared memory that could have been (ShmFallback).
func (m *Mesh) Describe() string {
	var shm int
	for _, v := range m.viaShm {
		if v {
			shm++
		}
	}
	tcp := m.size - 1 - shm
	var parts []string
	if shm > 0 {
		parts = append(parts, fmt.Sprintf("%s through shared memory (%s)", peersN(shm), m.shm.describe()))
	}
	if tcp > 0 {
		parts = append(parts, fmt.Sprintf("%s through TCP (%s)", peersN(tcp), strings.TrimPrefix(m.tcp.cfg.Describe(), "TCP ")))
	}
	if len(parts) == 0 {
		parts = append(parts, "no peers")
	}
	s := strings.Join(parts, ", ")
	if m.fallback != nil {
		s += "; not through shared memory: " + m.fallback.Error()
	}
	return s
}

// ShmFallback says why this rank reaches through TCP peers that could
// have shared memory with it under TransportAuto: it cannot tell which
// ranks share its machine, or the set-up with some of them failed. It is
// nil when there are none such (and always under TransportTCP; under
// TransportShm, Join fails instead). The job runs, more slowly: programs
// warn with it.
func (m *Mesh) ShmFallback() error {
	if m.fallback == nil {
		return nil
	}
	return fmt.Errorf("TCP instead of shared memory: %w (%s=tcp chooses TCP without this warning)", m.fallback, envnames.Transport)
}

func peersN(n int) string {
	if n == 1 {
		return "1 peer"
	}
	return fmt.Sprintf("%d peers", n)
}

// Abort fails the job from this rank: every peer's pending and later calls
// fail with a *PeerError naming this rank and reason.
func (m *Mesh) Abort(reason error) {
	m.fail(&PeerError{Rank: m.rank, Reporter: -1, Reason: "aborted", Err: reason})
}

// Close implements Transport. It says goodbye to every peer, so that none
// takes this rank for a dead one, and releases the segments, sockets and
// goroutines of both transports.
func (m *Mesh) Close() error {
	if m.shm != nil {
		m.shm.close()
	}
	return m.tcp.Close()
}

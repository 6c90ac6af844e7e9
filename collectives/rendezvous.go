package collectives

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// JoinConfig says how a rank joins its job.
type JoinConfig struct {
	Rank, Size int
	// Coord is the host:port of the coordinator, which rank 0 hosts.
	Coord string
	// CoordListener, on rank 0 only, is an open listener to serve the
	// coordinator on (the local launcher passes one down); if nil, rank 0
	// listens on Coord's port.
	CoordListener net.Listener
	// RendezvousDir, used when Coord is empty, is a directory shared by all
	// ranks (a shared filesystem) where rank 0 publishes the coordinator's
	// address in a file named after JobID.
	RendezvousDir string
	JobID         string
	// Secret must be the same on every rank.
	Secret string
	// Advertise, on rank 0 with a rendezvous directory, is the host the
	// others should reach it at (default: the first non-loopback IPv4
	// address of this host).
	Advertise string
	// Timeout bounds the whole rendezvous (default defaultJoinTimeout).
	Timeout time.Duration
	TCP     TCPConfig
	// Transport says whether ranks on one machine talk through shared
	// memory (TransportAuto, the default, and TransportShm) or TCP.
	Transport TransportMode
	Shm       ShmConfig

	// machine, when set, stands for this rank's machine identity
	// (machineID): tests put ranks of one process on different machines.
	machine string
	// meshListener, when set, is the listener for the peers' connections
	// (tests that must know its address before the job is in).
	meshListener net.Listener
	// linked, when set, is called once the links are made, before the
	// transport starts (tests make a rank slow to finish joining).
	linked func()
}

// Peer describes one rank of a joined job.
type Peer struct {
	Rank int    `json:"rank"`
	Addr string `json:"addr"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// CPUs is the number of cores the rank's host lets it use: with the
	// ranks per host, how contended its cores are.
	CPUs int `json:"cpus,omitempty"`
	// Machine identifies the ranks that can share memory (the same user,
	// running kernel, network namespace and host name); "" when the rank
	// cannot tell.
	Machine string `json:"machine,omitempty"`
	// Shm is the rank's TransportMode when it offers shared memory (auto
	// or shm), "" when it wants TCP only.
	Shm string `json:"shm,omitempty"`
}

type hello struct {
	Rank int    `json:"rank"`
	Size int    `json:"size"`
	Addr string `json:"addr"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	CPUs int    `json:"cpus,omitempty"`
	// Machine and Shm are Peer's.
	Machine string `json:"machine,omitempty"`
	Shm     string `json:"shm,omitempty"`
	// MAC proves the rank knows the job's secret: hex HMAC-SHA256 of the
	// coordinator's nonce, the rank and the size, keyed by the secret.
	MAC string `json:"mac"`
}

// Handshake limits: a connection has this long to prove it belongs to the
// job, and its hello this many bytes. Connections are handled side by
// side, so one that never speaks delays no one; at most the ranks
// expected and strangerSlots more are in their handshake at once.
const (
	handshakeTimeout = 5 * time.Second
	maxHello         = 64 << 10
	nonceLen         = 16
	strangerSlots    = 64
)

// mac is the proof that the sender of (rank, size) knows the secret,
// bound to the receiver's nonce so that it cannot be replayed.
func mac(key [32]byte, nonce []byte, rank, size int) []byte {
	h := hmac.New(sha256.New, key[:])
	h.Write(nonce)
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], uint32(rank))
	binary.LittleEndian.PutUint32(b[4:], uint32(size))
	h.Write(b[:])
	return h.Sum(nil)
}

func newNonce() ([]byte, error) {
	n := make([]byte, nonceLen)
	_, err := rand.Read(n)
	return n, err
}

type roster struct {
	Peers []Peer `json:"peers,omitempty"`
	Error string `json:"error,omitempty"`
}

// Join finds the other ranks through the coordinator, connects to every
// one of them and returns the transport and the job's peers: shared memory
// to the ranks on this rank's machine (unless cfg.Transport is
// TransportTCP), TCP to the others. Rank 0 hosts the coordinator. It fails
// with a clear error if a rank does not show up within the timeout.
func Join(ctx context.Context, cfg JoinConfig) (*Mesh, []Peer, error) {
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, nil, fmt.Errorf("rank %d of %d is not a valid rank", cfg.Rank, cfg.Size)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultJoinTimeout(cfg.Size)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cfg.TCP.firstSilence = cfg.Timeout
	secret := sha256.Sum256([]byte(cfg.Secret))

	// The congestion control is chosen before the connections are made,
	// so that none of their packets goes out under another (NewTCP sets
	// it again, for connections made elsewhere).
	control := congestionControl(cfg.TCP.Congestion)
	lc := net.ListenConfig{Control: control}
	ln := cfg.meshListener
	var err error
	if ln == nil {
		if ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(meshHost(cfg), "0")); err != nil {
			return nil, nil, fmt.Errorf("rank %d: listening for peers: %w", cfg.Rank, err)
		}
	}
	defer ln.Close()

	dial := cfg.Coord
	var coordErr error
	var coordWG sync.WaitGroup
	if cfg.Rank == 0 {
		cln := cfg.CoordListener
		if cln == nil {
			addr := ":0"
			if cfg.Coord != "" {
				host, port, err := net.SplitHostPort(cfg.Coord)
				if err != nil {
					return nil, nil, fmt.Errorf("coordinator address %q: %w", cfg.Coord, err)
				}
				addr = net.JoinHostPort(localBind(host), port)
			}
			if cln, err = net.Listen("tcp", addr); err != nil {
				return nil, nil, fmt.Errorf("rank 0: serving the coordinator on %s: %w", addr, err)
			}
		}
		bound, port, _ := net.SplitHostPort(cln.Addr().String())
		if ip := net.ParseIP(bound); ip == nil || ip.IsUnspecified() {
			bound = "127.0.0.1"
		}
		dial = net.JoinHostPort(bound, port) // rank 0 reaches its own coordinator where it listens
		if cfg.Coord == "" {
			host := cfg.Advertise
			if host == "" {
				host = advertiseHost()
			}
			cfg.Coord = net.JoinHostPort(host, port)
			if cfg.RendezvousDir == "" {
				cln.Close()
				return nil, nil, errors.New("no coordinator: set COMMPROF_COORD=host:port, MASTER_ADDR and MASTER_PORT, or COMMPROF_RENDEZVOUS_DIR")
			}
			f, err := publish(cfg.RendezvousDir, cfg.JobID, cfg.Coord)
			if err != nil {
				cln.Close()
				return nil, nil, err
			}
			defer os.Remove(f)
		}
		coordWG.Add(1)
		go func() {
			defer coordWG.Done()
			coordErr = coordinate(ctx, cln, cfg.Size, secret)
		}()
	} else if cfg.Coord == "" {
		if cfg.RendezvousDir == "" {
			return nil, nil, errors.New("no coordinator: set COMMPROF_COORD=host:port, MASTER_ADDR and MASTER_PORT, or COMMPROF_RENDEZVOUS_DIR")
		}
		if cfg.Coord, err = lookup(ctx, cfg.RendezvousDir, cfg.JobID); err != nil {
			return nil, nil, err
		}
		dial = cfg.Coord
	}

	peers, err := register(ctx, cfg, dial, ln, secret)
	coordWG.Wait()
	if coordErr != nil && err == nil {
		err = coordErr
	}
	if err != nil {
		return nil, nil, err
	}
	conns, err := connectMesh(ctx, cfg.Rank, ln, peers, secret, control)
	if err != nil {
		return nil, nil, err
	}
	var shm *shmTransport
	if cfg.Transport != TransportTCP {
		// Pairs on one machine that set up shared memory drop their TCP
		// connection.
		shm, err = joinShm(ctx, cfg, peers, conns, secret)
	}
	var tr *TCP
	if err == nil && cfg.linked != nil {
		cfg.linked()
	}
	if err == nil {
		tr, err = NewTCP(cfg.Rank, conns, cfg.TCP)
	}
	if err != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		if shm != nil {
			shm.close()
		}
		return nil, nil, err
	}
	return newMesh(tr, shm), peers, nil
}

// defaultJoinTimeout is the rendezvous's time for a job of size ranks:
// 60 s, and another second for every 512 pairs of ranks, at most 10
// minutes. Every rank connects to every other, and ranks on one machine
// also set up a shared-memory segment a pair: 512 ranks on one machine of
// 2 cores took about two minutes to join (docs/collectives.md).
func defaultJoinTimeout(size int) time.Duration {
	pairs := time.Duration(size) * time.Duration(size-1) / 2
	d := 60*time.Second + pairs*time.Second/512
	return min(d, 10*time.Minute)
}

func advertiseHost() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
				return ip.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

func rendezvousFile(dir, job string) string {
	if job == "" {
		job = "default"
	}
	return filepath.Join(dir, "commprof-coord-"+job)
}

func publish(dir, job, addr string) (string, error) {
	f := rendezvousFile(dir, job)
	tmp := f + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("publishing the coordinator address in %s: %w", dir, err)
	}
	if err := os.Rename(tmp, f); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("publishing the coordinator address in %s: %w", dir, err)
	}
	return f, nil
}

// lookup polls the rendezvous directory: a shared filesystem has no
// notification that works across hosts.
func lookup(ctx context.Context, dir, job string) (string, error) {
	f := rendezvousFile(dir, job)
	for {
		b, err := os.ReadFile(f)
		if err == nil && len(b) > 1 && b[len(b)-1] == '\n' {
			return string(b[:len(b)-1]), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for rank 0 to publish %s: %w", f, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// coordinate collects a hello from every rank and answers each with the
// roster of all of them. Each connection is handled on its own: it gets a
// nonce and has handshakeTimeout to answer with a hello of at most
// maxHello bytes that proves it knows the secret, so strangers that
// connect and say nothing, or send megabytes, delay and cost no one.
func coordinate(ctx context.Context, ln net.Listener, size int, secret [32]byte) error {
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	type member struct {
		h    hello
		conn net.Conn
	}
	members := make([]*member, size)
	have := 0
	arrived := make(chan *member)
	done := make(chan struct{})
	acc := newAcceptor(ln, size+strangerSlots)
	accepted := make(chan error, 1)
	defer func() {
		close(done)
		acc.close() // strangers still saying nothing are cut off
		<-acc.stopped
		for _, m := range members {
			if m != nil {
				m.conn.Close()
			}
		}
	}()
	reject := func(c net.Conn, msg string) {
		_ = json.NewEncoder(c).Encode(roster{Error: msg})
		c.Close()
	}
	go func() {
		accepted <- acc.run(func(c net.Conn) {
			h, err := readHello(c, secret, size)
			if !acc.handshaken(c) {
				return // cut off meanwhile: its slot went to a newer connection
			}
			if err != nil {
				if errors.Is(err, errWrongSecret) {
					reject(c, "wrong job secret (is COMMPROF_SECRET the same on every rank?)")
				} else {
					c.Close() // not one of ours
				}
				return
			}
			select {
			case arrived <- &member{h, c}:
			case <-done:
				c.Close()
			}
		})
	}()
	for have < size {
		var m *member
		select {
		case m = <-arrived:
		case err := <-accepted:
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			var missing []int
			for r, m := range members {
				if m == nil {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("coordinator: %d of %d ranks joined, missing ranks %v: %w", have, size, missing, err)
		}
		h, c := m.h, m.conn
		switch {
		case h.Size != size:
			reject(c, fmt.Sprintf("rank %d believes the world has %d ranks, rank 0 believes %d", h.Rank, h.Size, size))
			continue
		case h.Rank < 0 || h.Rank >= size:
			reject(c, fmt.Sprintf("rank %d is out of range for %d ranks", h.Rank, size))
			continue
		case members[h.Rank] != nil:
			reject(c, fmt.Sprintf("two processes claim rank %d (pids %d and %d)", h.Rank, members[h.Rank].h.PID, h.PID))
			continue
		}
		members[h.Rank] = m
		have++
	}
	var r roster
	for i, m := range members {
		r.Peers = append(r.Peers, Peer{Rank: i, Addr: m.h.Addr, Host: m.h.Host, PID: m.h.PID, CPUs: m.h.CPUs,
			Machine: m.h.Machine, Shm: m.h.Shm})
	}
	for _, m := range members {
		_ = m.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := json.NewEncoder(m.conn).Encode(r); err != nil {
			return fmt.Errorf("coordinator: sending the roster to rank %d: %w", m.h.Rank, err)
		}
	}
	return nil
}

var errWrongSecret = errors.New("wrong secret")

// readHello sends a connection the coordinator's nonce and reads its
// hello, which must prove the secret.
func readHello(c net.Conn, secret [32]byte, size int) (hello, error) {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	nonce, err := newNonce()
	if err != nil {
		return hello{}, err
	}
	if _, err := c.Write(nonce); err != nil {
		return hello{}, err
	}
	var h hello
	if err := json.NewDecoder(io.LimitReader(c, maxHello)).Decode(&h); err != nil {
		return hello{}, err
	}
	got, err := hex.DecodeString(h.MAC)
	if err != nil || !hmac.Equal(got, mac(secret, nonce, h.Rank, h.Size)) {
		return h, errWrongSecret
	}
	_ = c.SetDeadline(time.Time{})
	return h, nil
}

// register dials the coordinator (retrying while it is not up yet), says
// hello and waits for the roster.
func register(ctx context.Context, cfg JoinConfig, coord string, ln net.Listener, secret [32]byte) ([]Peer, error) {
	var c net.Conn
	var d net.Dialer
	for {
		var err error
		c, err = d.DialContext(ctx, "tcp", coord)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rank %d: cannot reach the coordinator at %s: %w", cfg.Rank, coord, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// Advertise the address of the interface that reaches the coordinator;
	// rank 0, which reaches itself on loopback, advertises the address the
	// others use for it.
	host, _, _ := net.SplitHostPort(c.LocalAddr().String())
	if ch, _, err := net.SplitHostPort(cfg.Coord); cfg.Rank == 0 && err == nil && ch != "" {
		if ip := net.ParseIP(ch); ip == nil || !ip.IsUnspecified() {
			host = ch
		}
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	hn, _ := os.Hostname()
	nonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, nonce); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rank %d: waiting for the coordinator at %s: %w", cfg.Rank, cfg.Coord, ctx.Err())
		}
		return nil, fmt.Errorf("rank %d: the coordinator at %s did not answer (is it a commprof coordinator?): %w", cfg.Rank, cfg.Coord, err)
	}
	h := hello{Rank: cfg.Rank, Size: cfg.Size, Addr: net.JoinHostPort(host, port), Host: hn, PID: os.Getpid(), CPUs: runtime.NumCPU(),
		MAC: hex.EncodeToString(mac(secret, nonce, cfg.Rank, cfg.Size))}
	if cfg.Transport != TransportTCP {
		h.Shm, h.Machine = cfg.Transport.String(), cfg.machine
		if h.Machine == "" {
			h.Machine = machineID(hn)
		}
	}
	if err := json.NewEncoder(c).Encode(h); err != nil {
		return nil, fmt.Errorf("rank %d: registering with the coordinator at %s: %w", cfg.Rank, cfg.Coord, err)
	}
	var r roster
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rank %d: waiting for all %d ranks to join at %s: %w", cfg.Rank, cfg.Size, cfg.Coord, ctx.Err())
		}
		return nil, fmt.Errorf("rank %d: reading the roster from the coordinator at %s: %w", cfg.Rank, cfg.Coord, err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("rank %d: the coordinator refused this rank: %s", cfg.Rank, r.Error)
	}
	if len(r.Peers) != cfg.Size {
		return nil, fmt.Errorf("rank %d: the coordinator sent %d peers for %d ranks", cfg.Rank, len(r.Peers), cfg.Size)
	}
	return r.Peers, nil
}

const meshMagic = "CPMESH01"

// connectMesh connects this rank to every other: it dials the ranks below
// it and accepts the ranks above it. A connection opens with the magic,
// the dialer's rank and the hash of the job secret.
func connectMesh(ctx context.Context, rank int, ln net.Listener, peers []Peer, secret [32]byte, control func(string, string, syscall.RawConn) error) ([]*net.TCPConn, error) {
	size := len(peers)
	conns := make([]*net.TCPConn, size)
	ok := false
	defer func() {
		if !ok {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var mu sync.Mutex
	var acceptErr error
	var wg sync.WaitGroup
	if want := size - 1 - rank; want > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acceptErr = acceptPeers(ln, rank, size, want, secret, &mu, conns)
		}()
	}
	var dialErr error
	for r := 0; r < rank; r++ {
		d := net.Dialer{Control: control}
		c, err := d.DialContext(ctx, "tcp", peers[r].Addr)
		if err != nil {
			dialErr = fmt.Errorf("rank %d: connecting to rank %d at %s (host %s): %w", rank, r, peers[r].Addr, peers[r].Host, err)
			break
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		nonce := make([]byte, nonceLen)
		var ack [1]byte
		if _, err = io.ReadFull(c, nonce); err == nil {
			var g [greetingLen]byte
			copy(g[:], meshMagic)
			binary.LittleEndian.PutUint32(g[8:], uint32(rank))
			binary.LittleEndian.PutUint32(g[12:], uint32(size))
			copy(g[16:], mac(secret, nonce, rank, size))
			if _, err = c.Write(g[:]); err == nil {
				_, err = io.ReadFull(c, ack[:])
			}
		}
		if err != nil || ack[0] != 1 {
			c.Close()
			if err != nil {
				dialErr = fmt.Errorf("rank %d: rank %d at %s (host %s) dropped the connection while it was being set up (did it exit?): %w", rank, r, peers[r].Addr, peers[r].Host, err)
			} else {
				dialErr = fmt.Errorf("rank %d: rank %d at %s refused the connection (a different job or secret?)", rank, r, peers[r].Addr)
			}
			break
		}
		_ = c.SetDeadline(time.Time{})
		mu.Lock()
		conns[r] = c.(*net.TCPConn)
		mu.Unlock()
	}
	if dialErr != nil {
		ln.Close()
	}
	wg.Wait()
	if dialErr != nil {
		return nil, dialErr
	}
	if acceptErr != nil {
		return nil, acceptErr
	}
	ok = true
	return conns, nil
}

// acceptPeers accepts the want ranks above this one. Each connection is
// greeted on its own, so one that never speaks delays none of the others;
// once every rank is in, greetings still pending (strangers) are cut off.
func acceptPeers(ln net.Listener, rank, size, want int, secret [32]byte, mu *sync.Mutex, conns []*net.TCPConn) error {
	got := make(chan struct{}, want)
	acceptDone := make(chan error, 1)
	acc := newAcceptor(ln, want+strangerSlots)
	defer func() {
		acc.close()
		<-acc.stopped
	}()
	go func() {
		acceptDone <- acc.run(func(c net.Conn) {
			r, err := readGreeting(c, secret, size)
			if !acc.handshaken(c) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil || r <= rank || conns[r] != nil {
				c.Close()
				return
			}
			conns[r] = c.(*net.TCPConn)
			got <- struct{}{}
		})
	}()
	for n := 0; n < want; {
		select {
		case <-got:
			n++
		case err := <-acceptDone:
			// The listener closed (the job failed or was cancelled): count
			// the greetings that made it, and say how many are missing.
			acc.close()
			n += len(got)
			if n >= want {
				return nil
			}
			return fmt.Errorf("rank %d: waiting for %d higher ranks to connect: %w", rank, want-n, err)
		}
	}
	return nil
}

// acceptor accepts a listener's connections for their handshakes, each
// on its own goroutine, so that one that never speaks delays no one. At
// most slots are in their handshake at once: one more makes the oldest
// give way (a rank's handshake takes a round trip, so the oldest is a
// stranger's), so connections by the thousand cost the job neither its
// file descriptors nor its memory. An accept that fails for want of a
// resource (EMFILE: this process is out of file descriptors) is tried
// again after a pause, an oldest handshake cut to make room, rather than
// ending the job.
type acceptor struct {
	ln    net.Listener
	slots int

	mu      sync.Mutex
	pending map[net.Conn]uint64 // connections in their handshake, by arrival
	next    uint64
	closed  chan struct{}
	stopped chan struct{} // closed when run has returned
	once    sync.Once
	wg      sync.WaitGroup
}

func newAcceptor(ln net.Listener, slots int) *acceptor {
	return &acceptor{ln: ln, slots: slots, pending: map[net.Conn]uint64{}, closed: make(chan struct{}), stopped: make(chan struct{})}
}

// Accept retry pauses: doubled from the first to the last, as net/http's
// server does.
const (
	acceptPauseMin = 5 * time.Millisecond
	acceptPauseMax = time.Second
)

// run accepts until the listener is closed, which it returns, and calls
// handshake(c) on a goroutine of its own for each connection. handshake
// must call handshaken(c) once it is done reading.
func (a *acceptor) run(handshake func(c net.Conn)) error {
	defer close(a.stopped)
	pause := time.Duration(0)
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if !temporary(err) {
				return err
			}
			// Out of descriptors or buffers: make room and try again.
			a.cutOldest()
			pause = min(max(2*pause, acceptPauseMin), acceptPauseMax)
			select {
			case <-a.closed:
				return err
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		a.mu.Lock()
		select {
		case <-a.closed:
			a.mu.Unlock()
			c.Close()
			return net.ErrClosed
		default:
		}
		if len(a.pending) >= a.slots {
			a.cutOldestLocked()
		}
		a.pending[c] = a.next
		a.next++
		a.wg.Add(1)
		a.mu.Unlock()
		go func() {
			defer a.wg.Done()
			handshake(c)
		}()
	}
}

// temporary reports whether an accept failed for want of a resource that
// may come back, not because the listener is closed.
func temporary(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// handshaken takes c out of the handshakes in progress: false if it was
// cut off meanwhile (it is closed; the caller must leave it).
func (a *acceptor) handshaken(c net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[c]; !ok {
		return false
	}
	delete(a.pending, c)
	return true
}

func (a *acceptor) cutOldest() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cutOldestLocked()
}

func (a *acceptor) cutOldestLocked() {
	var oldest net.Conn
	for c, at := range a.pending {
		if oldest == nil || at < a.pending[oldest] {
			oldest = c
		}
	}
	if oldest != nil {
		delete(a.pending, oldest)
		oldest.Close()
	}
}

// close stops accepting, cuts off the handshakes in progress and waits
// for their goroutines.
func (a *acceptor) close() {
	a.once.Do(func() {
		a.mu.Lock()
		close(a.closed)
		a.ln.Close()
		for c := range a.pending {
			c.Close()
		}
		clear(a.pending)
		a.mu.Unlock()
	})
	a.wg.Wait()
}

// readGreeting sends a connecting rank a nonce and checks its greeting:
// the magic, its rank and the job's size, and the MAC of them over the
// nonce, keyed by the job's secret.
func readGreeting(c net.Conn, secret [32]byte, size int) (int, error) {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	nonce, err := newNonce()
	if err != nil {
		return 0, err
	}
	if _, err := c.Write(nonce); err != nil {
		return 0, err
	}
	var g [greetingLen]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		return 0, err
	}
	r := int(binary.LittleEndian.Uint32(g[8:]))
	n := int(binary.LittleEndian.Uint32(g[12:]))
	if string(g[:8]) != meshMagic || n != size || r <= 0 || r >= size || !hmac.Equal(g[16:], mac(secret, nonce, r, n)) {
		_, _ = c.Write([]byte{0})
		return 0, errors.New("bad greeting")
	}
	_, err = c.Write([]byte{1})
	return r, err
}

// greetingLen is a mesh greeting: the magic, rank and size (4 bytes
// each) and the MAC.
const greetingLen = len(meshMagic) + 8 + sha256.Size

// meshHost is the address a rank's mesh listener binds: loopback for a
// job whose coordinator is on loopback (every rank on this host), else
// the address of the interface that reaches the coordinator, else every
// interface.
func meshHost(cfg JoinConfig) string {
	host, port, err := net.SplitHostPort(cfg.Coord)
	if err != nil || host == "" {
		if cfg.CoordListener != nil {
			if a, ok := cfg.CoordListener.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
				return "127.0.0.1"
			}
		}
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "127.0.0.1"
	}
	// Which local address would packets to the coordinator leave from?
	// Connecting a UDP socket picks the route without sending anything.
	c, err := net.Dial("udp", net.JoinHostPort(host, port))
	if err != nil {
		return ""
	}
	defer c.Close()
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsUnspecified() {
		return a.IP.String()
	}
	return ""
}

// localBind is the address rank 0's coordinator listens on for a
// coordinator host: loopback for loopback, the address itself when it is
// one of this host's, else every interface (a name that resolves
// elsewhere, a NAT).
func localBind(host string) string {
	ip := net.ParseIP(host)
	if ip == nil {
		if ips, err := net.LookupIP(host); err == nil && len(ips) > 0 {
			ip = ips[0]
		}
	}
	switch {
	case ip == nil:
		return ""
	case ip.IsLoopback():
		return "127.0.0.1"
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return ip.String()
			}
		}
	}
	return ""
}

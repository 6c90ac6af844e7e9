//go:build linux

package collectives

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/commprof/commprof/internal/envnames"
	"golang.org/x/sys/unix"
)

// Setting up a pair on one machine (lo the lower rank, hi the higher),
// after the TCP mesh is connected and authenticated:
//
//  1. lo offers shared memory on their TCP connection: the name of its
//     abstract Unix socket (SOCK_SEQPACKET, one per rank, gone when the
//     rank is: no file to leave behind).
//  2. hi connects to it. lo sends a nonce; hi answers with its rank and
//     the MAC of the nonce keyed by the job's secret, and a nonce of its
//     own. Each side checks that the other runs as its own user
//     (SO_PEERCRED), and learns the other's pid as its own pid namespace
//     numbers it.
//  3. lo creates the segment (memfd, sealed against shrinking and
//     growing so that neither side can make the other fault), writes in
//     its header the MAC of hi's nonce, and passes it with its doorbell
//     (SCM_RIGHTS). hi maps it only if that MAC is right: a segment from
//     another job or user is never attached.
//  4. hi passes its doorbell back. Each side tries to read a cookie from
//     the other's memory (process_vm_readv), which decides whether that
//     side pulls large messages or has them streamed through the ring.
//  5. Each side says on the TCP connection whether it succeeded. Both
//     did: the pair uses shared memory and closes the TCP connection.
//     Otherwise the pair keeps TCP, unless either rank asked for
//     TransportShm, and then Join fails with the reason.
const (
	shmGreetMagic = "CPSHMHI1"
	shmLabel      = "commprof-shm\x00"
	shmMinRing    = 4 << 10
	shmMaxRing    = 64 << 20
)

// shmMAC is mac over a nonce labelled for this handshake, so that no
// answer from another of commprof's handshakes can stand for one of its.
func shmMAC(secret [32]byte, nonce []byte, rank, size int) []byte {
	return mac(secret, append([]byte(shmLabel), nonce...), rank, size)
}

// shmAccepted is a connection from a higher rank that has proved it
// belongs to the job.
type shmAccepted struct {
	c     *net.UnixConn
	nonce []byte // the higher rank's
	pid   int
}

// joinShm links this rank through shared memory with every peer on its
// machine that wants it, over their TCP connections, and clears conns[p]
// for every peer p it links. It returns nil when it links none.
//
// Under TransportAuto, peers that could share memory with this rank but
// do not are reached through TCP, and the transport returned (without
// links, if it has none) says why in its fallback; under TransportShm
// that is an error.
func joinShm(ctx context.Context, cfg JoinConfig, peers []Peer, conns []*net.TCPConn, secret [32]byte) (*shmTransport, error) {
	me := peers[cfg.Rank]
	if me.Shm == "" {
		return nil, nil // this rank asked for TCP
	}
	if me.Machine == "" {
		return unknownMachine(cfg, peers)
	}
	var pairs []int
	local := 0
	for _, p := range peers {
		if p.Machine != me.Machine {
			continue
		}
		local++
		if p.Rank != me.Rank && p.Shm != "" {
			pairs = append(pairs, p.Rank)
		}
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	t := &shmTransport{rank: cfg.Rank, size: len(peers), cfg: resolveShm(cfg.Shm, cfg.TCP, local, measureCopies),
		clock: newMonoClock(), links: make([]*shmLink, len(peers))}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return shmSetupError(cfg, fmt.Errorf("creating a doorbell (eventfd): %w", err))
	}
	bell := os.NewFile(uintptr(efd), "commprof-doorbell")
	rc, err := bell.SyscallConn()
	if err != nil {
		bell.Close()
		return shmSetupError(cfg, err)
	}
	t.bell, t.bellFD, t.bellRC = bell, efd, rc

	// The TCP connections carry the offers and verdicts until the job's
	// deadline.
	if dl, ok := ctx.Deadline(); ok {
		for _, p := range pairs {
			_ = conns[p].SetDeadline(dl)
		}
	}
	defer func() {
		for _, p := range pairs {
			if conns[p] != nil {
				_ = conns[p].SetDeadline(time.Time{})
			}
		}
	}()

	var ln *net.UnixListener
	var name string
	accepted := make(map[int]chan shmAccepted)
	for _, p := range pairs {
		if p > cfg.Rank {
			accepted[p] = make(chan shmAccepted, 1)
		}
	}
	var lnErr error
	if len(accepted) > 0 {
		var b [12]byte
		_, _ = rand.Read(b[:])
		name = "@commprof-shm-" + hex.EncodeToString(b[:])
		ln, lnErr = net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	}
	var acceptWG sync.WaitGroup
	if ln != nil {
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		acceptWG.Add(1)
		go func() {
			defer acceptWG.Done()
			shmAccept(ctx, ln, cfg.Rank, len(peers), secret, accepted)
		}()
	}

	links := make([]*shmLink, len(peers))
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ok bool
			if p > cfg.Rank {
				links[p], ok, errs[p] = t.offer(ctx, conns[p], p, name, lnErr, accepted[p], secret)
			} else {
				links[p], ok, errs[p] = t.answer(ctx, conns[p], p, secret)
			}
			if !ok && links[p] != nil {
				links[p].release()
				links[p] = nil
			}
		}()
	}
	wg.Wait()
	if ln != nil {
		ln.Close()
		acceptWG.Wait()
		for _, ch := range accepted {
			select {
			case a := <-ch: // its pair gave up before taking it
				a.c.Close()
			default:
			}
		}
	}
	if err := ctx.Err(); err != nil {
		for _, l := range links {
			if l != nil {
				l.release()
			}
		}
		t.bell.Close()
		return nil, fmt.Errorf("rank %d: setting up shared memory: %w", cfg.Rank, err)
	}
	var failed, fallback error
	for _, p := range pairs {
		if links[p] == nil {
			if errs[p] == nil {
				errs[p] = fmt.Errorf("rank %d could not set it up (it says why)", p)
			}
			if me.Shm == TransportShm.String() || peers[p].Shm == TransportShm.String() {
				failed = errors.Join(failed, fmt.Errorf("rank %d: shared memory with rank %d on the same machine: %w", cfg.Rank, p, errs[p]))
			} else {
				fallback = errors.Join(fallback, fmt.Errorf("setting up shared memory with rank %d: %w", p, errs[p]))
			}
		}
	}
	if failed != nil {
		for _, l := range links {
			if l != nil {
				l.release()
			}
		}
		t.bell.Close()
		return nil, fmt.Errorf("%w (%s=shm asks for shared memory between the ranks of a machine; %s=auto falls back to TCP)", failed, envnames.Transport, envnames.Transport)
	}
	for _, p := range pairs {
		if l := links[p]; l != nil {
			t.links[p] = l
			t.active = append(t.active, l)
			_ = conns[p].Close()
			conns[p] = nil
		}
	}
	t.fallback = fallback
	if len(t.active) == 0 {
		t.bell.Close()
		t.bell = nil
	}
	return t, nil // newMesh starts it
}

// shmSetupError is joinShm's answer when this rank cannot set up shared
// memory with any peer: an error with TransportShm, TCP saying why with
// TransportAuto.
func shmSetupError(cfg JoinConfig, err error) (*shmTransport, error) {
	if cfg.Transport == TransportShm {
		return nil, fmt.Errorf("rank %d: setting up shared memory: %w", cfg.Rank, err)
	}
	return &shmTransport{fallback: fmt.Errorf("setting up shared memory: %w", err)}, nil
}

// unknownMachine is joinShm's answer when this rank cannot tell which
// ranks share its machine (machineParts failed): it offers no shared
// memory, and if any rank has its host name, says why (TransportAuto) or
// fails (TransportShm).
func unknownMachine(cfg JoinConfig, peers []Peer) (*shmTransport, error) {
	me := peers[cfg.Rank]
	var near []string
	for _, p := range peers {
		if p.Rank != me.Rank && p.Host == me.Host {
			near = append(near, fmt.Sprint(p.Rank))
		}
	}
	if len(near) == 0 {
		return nil, nil // no neighbour to miss
	}
	_, why := machineParts()
	if why == nil {
		why = errors.New("its machine identity is unknown")
	}
	who := "rank " + near[0]
	if len(near) > 1 {
		who = "ranks " + strings.Join(near, ", ")
	}
	err := fmt.Errorf("this rank cannot tell which ranks share its machine (%s on host %q may): %w", who, me.Host, why)
	if cfg.Transport == TransportShm {
		return nil, fmt.Errorf("rank %d: %s=shm: %w", cfg.Rank, envnames.Transport, err)
	}
	return &shmTransport{fallback: err}, nil
}

// shmAccept accepts the higher ranks' connections, checks each one's
// greeting and hands it to the goroutine of its pair. Each connection is
// greeted on its own, so one that never speaks delays no one; once the
// listener closes, greetings still pending (strangers) are cut off.
func shmAccept(ctx context.Context, ln *net.UnixListener, rank, size int, secret [32]byte, accepted map[int]chan shmAccepted) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := map[int]bool{}
	pending := map[*net.UnixConn]bool{}
	defer func() {
		mu.Lock()
		for c := range pending {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		mu.Lock()
		pending[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if dl, ok := ctx.Deadline(); ok {
				_ = c.SetDeadline(dl)
			} else {
				_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
			}
			nonce, err := newNonce()
			if err == nil {
				_, err = c.Write(nonce)
			}
			var g [len(shmGreetMagic) + 8 + 32 + nonceLen]byte
			n := 0
			if err == nil {
				n, err = c.Read(g[:])
			}
			hi := int(binary.LittleEndian.Uint32(g[8:]))
			cred, cerr := peerCred(c)
			mu.Lock()
			ch := accepted[hi]
			ok := pending[c] && err == nil && cerr == nil && n == len(g) && string(g[:8]) == shmGreetMagic &&
				int(binary.LittleEndian.Uint32(g[12:])) == size && ch != nil && !taken[hi] &&
				hmac.Equal(g[16:48], shmMAC(secret, nonce, hi, size)) && int(cred.Uid) == os.Getuid()
			if ok {
				taken[hi] = true
			}
			delete(pending, c)
			mu.Unlock()
			if !ok {
				c.Close() // not one of ours
				return
			}
			ch <- shmAccepted{c: c, nonce: append([]byte(nil), g[48:]...), pid: int(cred.Pid)}
		}()
	}
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, gerr
}

// verdict tells the peer on c whether this side succeeded and returns
// whether both did.
func verdict(c *net.TCPConn, mine bool, theirs <-chan byte) bool {
	b := byte(0)
	if mine {
		b = 1
	}
	_, werr := c.Write([]byte{b})
	v, ok := <-theirs
	return mine && werr == nil && ok && v == 1
}

// readByte reads the peer's verdict off c.
func readByte(c *net.TCPConn) <-chan byte {
	ch := make(chan byte, 1)
	go func() {
		var b [1]byte
		if _, err := c.Read(b[:]); err == nil {
			ch <- b[0]
		}
		close(ch)
	}()
	return ch
}

// offer is the lower rank's side of the set-up with the higher rank hi.
func (t *shmTransport) offer(ctx context.Context, c *net.TCPConn, hi int, name string, lnErr error, accepted <-chan shmAccepted, secret [32]byte) (*shmLink, bool, error) {
	msg := []byte{0, 0}
	if name != "" && lnErr == nil {
		msg = append([]byte{1, byte(len(name))}, name...)
	}
	if _, err := c.Write(msg); err != nil {
		return nil, false, err
	}
	theirs := readByte(c)
	if msg[0] == 0 {
		return nil, verdict(c, false, theirs), fmt.Errorf("listening on a Unix socket: %w", lnErr)
	}
	var a shmAccepted
	var err error
	select {
	case a = <-accepted:
	case v, ok := <-theirs:
		// The higher rank gave up before it connected: it could not reach
		// the socket.
		_ = v
		_, _ = c.Write([]byte{0})
		if !ok {
			return nil, false, errors.New("the connection closed during set-up")
		}
		return nil, false, fmt.Errorf("rank %d could not connect to this rank's Unix socket", hi)
	case <-ctx.Done():
		return nil, verdict(c, false, theirs), ctx.Err()
	}
	l, err := t.offerSegment(a, hi, secret)
	if err != nil {
		a.c.Close()
	}
	return l, verdict(c, err == nil, theirs), err
}

func (t *shmTransport) offerSegment(a shmAccepted, hi int, secret [32]byte) (*shmLink, error) {
	ring := t.cfg.ring
	size := shmHeaderSize + 2*ring
	fd, err := unix.MemfdCreate("commprof-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("creating the segment (memfd_create): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("sizing the segment: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return nil, fmt.Errorf("sealing the segment: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mapping the segment: %w", err)
	}
	hdr := (*shmHeader)(unsafe.Pointer(&mem[0]))
	copy(hdr.magic[:], shmMagic)
	hdr.version, hdr.ringBytes = shmVersion, uint32(ring)
	token := shmMAC(secret, a.nonce, t.rank, t.size)
	copy(hdr.token[:], token)

	cookie, cookieAddr := newCookie()
	var m3 [4 + 32 + 16]byte
	binary.LittleEndian.PutUint32(m3[:], uint32(ring))
	copy(m3[4:], token)
	binary.LittleEndian.PutUint64(m3[36:], cookieAddr)
	copy(m3[44:], cookie[:])
	if _, _, err := a.c.WriteMsgUnix(m3[:], unix.UnixRights(fd, t.bellFD), nil); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("passing the segment: %w", err)
	}
	var m4 [2 + 16]byte
	fds, n, err := readRights(a.c, m4[:], 1)
	runtime.KeepAlive(cookie)
	if err != nil {
		err = fmt.Errorf("rank %d did not take the segment (if it refused it, it says why): %w", hi, err)
	} else if n != len(m4) || m4[0] != 1 {
		closeAll(fds)
		err = fmt.Errorf("rank %d refused the segment", hi)
	}
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	pull := probePull(a.pid, binary.LittleEndian.Uint64(m4[2:]), m4[10:18])
	m5 := []byte{1, b2u8(pull)}
	if _, err := a.c.Write(m5); err != nil {
		unix.Munmap(mem)
		closeAll(fds)
		return nil, err
	}
	_ = a.c.SetDeadline(time.Time{})
	return t.newLink(hi, a.pid, mem, ring, a.c, fds[0], pull, m4[1] == 1), nil
}

// answer is the higher rank's side of the set-up with the lower rank lo.
func (t *shmTransport) answer(ctx context.Context, c *net.TCPConn, lo int, secret [32]byte) (*shmLink, bool, error) {
	var head [2]byte
	if _, err := readFull(c, head[:]); err != nil {
		return nil, false, err
	}
	name := make([]byte, head[1])
	if _, err := readFull(c, name); err != nil {
		return nil, false, err
	}
	theirs := readByte(c)
	if head[0] != 1 {
		return nil, verdict(c, false, theirs), fmt.Errorf("rank %d offers no shared memory", lo)
	}
	u, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: string(name), Net: "unixpacket"})
	if err != nil {
		return nil, verdict(c, false, theirs), fmt.Errorf("connecting to rank %d's Unix socket: %w", lo, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = u.SetDeadline(dl)
	}
	l, err := t.answerSegment(u, lo, secret)
	if err != nil {
		u.Close()
	} else {
		_ = u.SetDeadline(time.Time{})
	}
	return l, verdict(c, err == nil, theirs), err
}

func (t *shmTransport) answerSegment(u *net.UnixConn, lo int, secret [32]byte) (*shmLink, error) {
	nonceLo := make([]byte, nonceLen)
	if n, err := u.Read(nonceLo); err != nil || n != nonceLen {
		return nil, fmt.Errorf("rank %d's Unix socket did not greet (%v)", lo, err)
	}
	cred, err := peerCred(u)
	if err != nil {
		return nil, err
	}
	if int(cred.Uid) != os.Getuid() {
		return nil, fmt.Errorf("rank %d's Unix socket belongs to user %d, not to this rank's user %d", lo, cred.Uid, os.Getuid())
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, err
	}
	var g [len(shmGreetMagic) + 8 + 32 + nonceLen]byte
	copy(g[:], shmGreetMagic)
	binary.LittleEndian.PutUint32(g[8:], uint32(t.rank))
	binary.LittleEndian.PutUint32(g[12:], uint32(t.size))
	copy(g[16:], shmMAC(secret, nonceLo, t.rank, t.size))
	copy(g[48:], nonce)
	if _, err := u.Write(g[:]); err != nil {
		return nil, err
	}
	var m3 [4 + 32 + 16]byte
	fds, n, err := readRights(u, m3[:], 2)
	if err != nil {
		return nil, fmt.Errorf("receiving the segment from rank %d: %w", lo, err)
	}
	mem, err := attachSegment(fds[0], m3[:n], shmMAC(secret, nonce, lo, t.size))
	unix.Close(fds[0])
	if err != nil {
		unix.Close(fds[1])
		return nil, fmt.Errorf("rank %d's segment: %w", lo, err)
	}
	ring := int(binary.LittleEndian.Uint32(m3[:]))
	pull := probePull(int(cred.Pid), binary.LittleEndian.Uint64(m3[36:]), m3[44:52])
	cookie, cookieAddr := newCookie()
	var m4 [2 + 16]byte
	m4[0], m4[1] = 1, b2u8(pull)
	binary.LittleEndian.PutUint64(m4[2:], cookieAddr)
	copy(m4[10:], cookie[:])
	var m5 [2]byte
	_, _, err = u.WriteMsgUnix(m4[:], unix.UnixRights(t.bellFD), nil)
	if err == nil {
		var k int
		k, err = u.Read(m5[:])
		if err == nil && (k != 2 || m5[0] != 1) {
			err = fmt.Errorf("rank %d gave up on the segment", lo)
		}
	}
	runtime.KeepAlive(cookie)
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fds[1])
		return nil, err
	}
	return t.newLink(lo, int(cred.Pid), mem, ring, u, fds[1], pull, m5[1] == 1), nil
}

// attachSegment checks and maps the segment a lower rank passed: its size
// and seals, then its header, which must carry token.
func attachSegment(fd int, m3 []byte, token []byte) ([]byte, error) {
	if len(m3) != 4+32+16 {
		return nil, errors.New("a malformed offer")
	}
	ring := int(binary.LittleEndian.Uint32(m3))
	if ring < shmMinRing || ring > shmMaxRing || ring&(ring-1) != 0 {
		return nil, fmt.Errorf("a ring of %d bytes", ring)
	}
	if !hmac.Equal(m3[4:36], token) {
		return nil, errors.New("it does not prove the job's secret (another job's?)")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	size := shmHeaderSize + 2*ring
	if st.Size != int64(size) || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("a file of %d bytes where %d were announced", st.Size, size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return nil, fmt.Errorf("it is not sealed against resizing (%v)", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	hdr := (*shmHeader)(unsafe.Pointer(&mem[0]))
	if string(hdr.magic[:]) != shmMagic || hdr.version != shmVersion || int(hdr.ringBytes) != ring || !hmac.Equal(hdr.token[:], token) {
		unix.Munmap(mem)
		return nil, errors.New("its header is not this job's")
	}
	return mem, nil
}

// readRights reads one message into p with want descriptors attached.
func readRights(c *net.UnixConn, p []byte, want int) ([]int, int, error) {
	oob := make([]byte, unix.CmsgSpace(4*want))
	n, oobn, _, _, err := c.ReadMsgUnix(p, oob)
	if err != nil {
		return nil, 0, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, 0, err
	}
	var fds []int
	for i := range msgs {
		if f, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, f...)
		}
	}
	if len(fds) != want {
		closeAll(fds)
		return nil, 0, fmt.Errorf("%d descriptors where %d were expected", len(fds), want)
	}
	return fds, n, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func readFull(c *net.TCPConn, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := c.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// newCookie returns 8 random bytes on the heap and their address, for a
// peer to try to read.
func newCookie() (*[8]byte, uint64) {
	c := new([8]byte)
	_, _ = rand.Read(c[:])
	return c, uint64(uintptr(unsafe.Pointer(c)))
}

// probePull reports whether this process can read want at addr in the
// memory of process pid.
func probePull(pid int, addr uint64, want []byte) bool {
	if pid <= 0 {
		return false
	}
	var got [8]byte
	liov := []unix.Iovec{{Base: &got[0]}}
	liov[0].SetLen(8)
	riov := []unix.RemoteIovec{{Base: uintptr(addr), Len: 8}}
	n, err := unix.ProcessVMReadv(pid, liov, riov, 0)
	return err == nil && n == 8 && hmac.Equal(got[:], want)
}

// newLink wraps a mapped segment as the link to peer.
func (t *shmTransport) newLink(peer, pid int, mem []byte, ring int, ctrl *net.UnixConn, peerBell int, pull, push bool) *shmLink {
	hdr := (*shmHeader)(unsafe.Pointer(&mem[0]))
	r0, r1 := mem[shmHeaderSize:shmHeaderSize+ring], mem[shmHeaderSize+ring:shmHeaderSize+2*ring]
	l := &shmLink{t: t, peer: peer, pid: pid, mem: mem, hdr: hdr, mask: uint64(ring - 1), ctrl: ctrl,
		peerBell: peerBell, pull: pull, push: push, box: newMailbox(peer),
		wake: make(chan struct{}, 1), dead: make(chan struct{}), ctrlDone: make(chan struct{})}
	if t.rank < peer {
		l.out, l.in, l.outRing, l.inRing = &hdr.ctl[0], &hdr.ctl[1], r0, r1
		l.myBeat, l.peerBeat = &hdr.beat[0].n, &hdr.beat[1].n
	} else {
		l.out, l.in, l.outRing, l.inRing = &hdr.ctl[1], &hdr.ctl[0], r1, r0
		l.myBeat, l.peerBeat = &hdr.beat[1].n, &hdr.beat[0].n
	}
	return l
}

// release undoes newLink for a link that is not used.
func (l *shmLink) release() {
	_ = l.ctrl.Close()
	_ = unix.Munmap(l.mem)
	_ = unix.Close(l.peerBell)
}

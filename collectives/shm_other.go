//go:build !linux

package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/commprof/commprof/internal/envnames"
)

// Shared memory between ranks is implemented on Linux only
// (shm_linux.go); elsewhere every pair uses TCP, TransportShm fails the
// join of a rank that has a peer on its host, and TransportAuto says why
// it uses TCP there (Mesh.ShmFallback).
type shmTransport struct {
	links    []*shmLink
	active   []*shmLink
	onFail   func(*PeerError)
	fallback error
}

type shmLink struct{ box *mailbox }

var errNoShm = errors.New("shared memory between ranks is supported on Linux only")

func (t *shmTransport) send(context.Context, int, Header, []byte) error { return errNoShm }
func (t *shmTransport) fail(*PeerError)                                 {}
func (t *shmTransport) close()                                          {}
func (t *shmTransport) describe() string                                { return "" }
func (t *shmTransport) start()                                          {}

func machineParts() (string, error) { return "", errNoShm }

func joinShm(_ context.Context, cfg JoinConfig, peers []Peer, _ []*net.TCPConn, _ [32]byte) (*shmTransport, error) {
	if cfg.Transport == TransportTCP {
		return nil, nil
	}
	for _, p := range peers {
		if p.Rank != cfg.Rank && p.Host == peers[cfg.Rank].Host {
			if cfg.Transport == TransportShm {
				return nil, fmt.Errorf("rank %d: %s=shm: %w", cfg.Rank, envnames.Transport, errNoShm)
			}
			return &shmTransport{fallback: errNoShm}, nil
		}
	}
	return nil, nil
}

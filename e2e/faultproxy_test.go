package e2e

import (
	"bytes"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// faultProxy is a unix-socket proxy in front of the Docker engine that the
// daemon is pointed at with DOCKER_HOST. It passes everything through, and
// on request cuts the long-lived attach and wait connections (as a dockerd
// restart with live-restore does) or hangs: every request from then on is
// accepted and never answered, until the hang ends (those connections are
// then closed; their requests never reach the engine).
type faultProxy struct {
	path     string
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	hang    bool
	release chan struct{} // closed when the current hang ends
	conns   map[*proxyConn]struct{}
	closed  bool
	held    atomic.Int64 // requests held by hangs so far
}

type proxyConn struct {
	client, server net.Conn // server is nil for a connection held at accept
	stream         atomic.Bool
}

func (c *proxyConn) close() {
	c.client.Close()
	if c.server != nil {
		c.server.Close()
	}
}

// startFaultProxy listens on a socket in a temporary directory and forwards
// to the engine's socket; it stops at the end of the test.
func startFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	p := &faultProxy{
		path:     filepath.Join(t.TempDir(), "proxy.sock"),
		upstream: dockerSocket(t),
		conns:    make(map[*proxyConn]struct{}),
		release:  make(chan struct{}),
	}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// dockerSocket is the engine's unix socket: DOCKER_HOST's when it names
// one, else the default.
func dockerSocket(t *testing.T) string {
	if h := docker.DaemonHost(); len(h) > len("unix://") && h[:len("unix://")] == "unix://" {
		return h[len("unix://"):]
	}
	t.Skip("SKIPPING: the fault proxy needs the engine on a unix socket; DOCKER_HOST is " + docker.DaemonHost())
	return ""
}

// dockerHost is the DOCKER_HOST value pointing at the proxy.
func (p *faultProxy) dockerHost() string { return "unix://" + p.path }

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pc := &proxyConn{client: c}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		hang, release := p.hang, p.release
		if !hang {
			s, err := net.Dial("unix", p.upstream)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			pc.server = s
		}
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		if hang {
			p.held.Add(1)
			go p.hold(pc, release)
			continue
		}
		go p.up(pc)
		go p.down(pc)
	}
}

// hold keeps a connection unanswered until the hang ends, then closes it.
func (p *faultProxy) hold(pc *proxyConn, release <-chan struct{}) {
	go io.Copy(io.Discard, pc.client) // accept what is sent; answer nothing
	<-release
	p.drop(pc)
}

func (p *faultProxy) drop(pc *proxyConn) {
	pc.close()
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// up copies the client's bytes to the engine, marks attach and wait
// requests, and holds the connection when a request comes during a hang.
func (p *faultProxy) up(pc *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := pc.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			hang, release := p.hang, p.release
			p.mu.Unlock()
			if hang {
				p.held.Add(1)
				<-release
				p.drop(pc)
				return
			}
			if bytes.Contains(chunk, []byte("/attach?")) || bytes.Contains(chunk, []byte("/wait?")) {
				pc.stream.Store(true)
			}
			if _, werr := pc.server.Write(chunk); werr != nil {
				p.drop(pc)
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Half-close: the container's stdin ends, its output flows on.
				if uc, ok := pc.server.(*net.UnixConn); ok {
					uc.CloseWrite()
					return
				}
			}
			p.drop(pc)
			return
		}
	}
}

// down copies the engine's answer back to the client.
func (p *faultProxy) down(pc *proxyConn) {
	_, err := io.Copy(pc.client, pc.server)
	if err == nil {
		if uc, ok := pc.client.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
	}
	p.drop(pc)
}

// cutStreams closes every connection that carried an attach or a wait
// request, on both sides, and returns how many it cut.
func (p *faultProxy) cutStreams() int {
	p.mu.Lock()
	var cut []*proxyConn
	for pc := range p.conns {
		if pc.stream.Load() && pc.server != nil {
			cut = append(cut, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range cut {
		p.drop(pc)
	}
	return len(cut)
}

// setHang starts (true) or ends (false) a hang of the engine.
func (p *faultProxy) setHang(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.hang {
		return
	}
	p.hang = on
	if !on {
		close(p.release)
		p.release = make(chan struct{})
	}
}

func (p *faultProxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.hang {
		p.hang = false
		close(p.release)
	}
	conns := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, pc := range conns {
		pc.close()
	}
}

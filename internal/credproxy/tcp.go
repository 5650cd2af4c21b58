package credproxy

// The proxy across nodes (decision record 36): one TCP listener for every
// run, each run known by a random token its runner sends first on each
// connection ("BRIDGED-PROXY <token>\n"), the rest of the connection
// served by the same server, guard, limits and meter as a run's socket.
// The run's IPC crosses on the same channel (decision record 42): paths
// under /ipc/ go to the IPC host's handler for the token's group.

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Bounds of a connection's token line.
const (
	tokenLineMax     = 128
	tokenLineTimeout = 5 * time.Second
)

// TCP is the proxy's listener across nodes. Create it with ListenTCP.
type TCP struct {
	p    *Proxy
	ln   net.Listener
	addr string // what Pods dial

	ipc IPC // nil: no IPC on the channel

	mu   sync.Mutex
	runs map[string]*tcpRun // by token
	done chan struct{}
}

// IPC opens the IPC of a run of group on its channel (ipchost.Host.Channel):
// the handler of its /ipc/ paths, and what ends it with the run.
type IPC func(group string) (handler http.Handler, closeFn func())

// ipcPrefix starts the paths of the IPC channel (ipc.ChannelRequest, …).
const ipcPrefix = "/ipc/"

// tcpRun is one run's server, fed the connections its token opens.
type tcpRun struct {
	token string
	ln    *chanListener
	srv   *runServer
	ipc   func() // ends the run's IPC; nil: none
}

// ListenTCP serves the proxy on addr (host:port); advertise is the
// host:port the Pods reach it at; ipcOpen, when not nil, serves each run's IPC
// on the same channel. Close stops it.
func (p *Proxy) ListenTCP(addr, advertise string, ipcOpen IPC) (*TCP, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("credential proxy: listen on %s: %w", addr, err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	t := &TCP{p: p, ln: ln, addr: advertise, ipc: ipcOpen, runs: map[string]*tcpRun{}, done: make(chan struct{})}
	go t.accept()
	p.log.Info().Str("addr", ln.Addr().String()).Str("advertised", advertise).Msg("credential proxy listening over TCP")
	return t, nil
}

// Addr is the host:port the Pods reach the proxy at.
func (t *TCP) Addr() string { return t.addr }

// ListenAddr is where the listener is bound.
func (t *TCP) ListenAddr() string { return t.ln.Addr().String() }

// Close stops listening and ends every run's server.
func (t *TCP) Close() error {
	err := t.ln.Close()
	<-t.done
	t.mu.Lock()
	runs := make([]*tcpRun, 0, len(t.runs))
	for _, r := range t.runs {
		runs = append(runs, r)
	}
	t.runs = map[string]*tcpRun{}
	t.mu.Unlock()
	for _, r := range runs {
		r.close()
	}
	return err
}

// OpenTCP gives the run name of group a fresh token and serves what
// arrives with it until closeFn.
func (t *TCP) OpenTCP(group, name string) (token string, closeFn func(), err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	token = hex.EncodeToString(b[:])
	cl := newChanListener(t.ln.Addr())
	var h http.Handler = t.p.guard(group, name, t.p.Handler(group, name))
	var closeIPC func()
	if t.ipc != nil {
		var ipcH http.Handler
		ipcH, closeIPC = t.ipc(group)
		h = t.p.withIPC(h, ipcH)
	}
	srv := t.p.server(h)
	srv.ErrorLog = stdlog.New(debugWriter{t.p.log}, "", 0)
	r := &tcpRun{token: token, ln: cl, srv: &runServer{srv: srv, served: make(chan struct{})}, ipc: closeIPC}
	go func() {
		defer close(r.srv.served)
		_ = srv.Serve(t.p.listen(cl, group, name))
	}()
	t.mu.Lock()
	t.runs[token] = r
	t.mu.Unlock()
	var once sync.Once
	return token, func() {
		once.Do(func() {
			t.mu.Lock()
			delete(t.runs, token)
			t.mu.Unlock()
			r.close()
		})
	}, nil
}

func (t *TCP) accept() {
	defer close(t.done)
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.p.log.Warn().Err(err).Msg("credential proxy: TCP listener stopped")
			}
			return
		}
		go t.route(c)
	}
}

// route reads a connection's token line and hands the connection to its
// run; an unknown token, or no line in time, closes it unanswered.
func (t *TCP) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(tokenLineTimeout))
	br := bufio.NewReaderSize(c, tokenLineMax)
	line, err := br.ReadSlice('\n')
	token, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), ipc.ProxyTokenLine)
	var run *tcpRun
	if err == nil && ok {
		t.mu.Lock()
		for tok, r := range t.runs {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1 {
				run = r
			}
		}
		t.mu.Unlock()
	}
	if run == nil {
		t.p.log.Warn().Str("remote", c.RemoteAddr().String()).Msg("credential proxy: a TCP connection without a valid token, closed")
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if !run.ln.give(&bufConn{Conn: c, r: br}) {
		_ = c.Close()
	}
}

// close cuts the run's connections and ends its IPC.
func (r *tcpRun) close() {
	r.srv.close()
	if r.ipc != nil {
		r.ipc()
	}
}

// withIPC sends the paths under ipcPrefix to ipcH and the rest to api. An
// IPC request's body gets the proxy's read deadline (the input stream has
// none: it is a GET that stays open).
func (p *Proxy) withIPC(api, ipcH http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, ipcPrefix) || r.URL.IsAbs() {
			api.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(p.lim.lim.ReadTimeout))
		}
		ipcH.ServeHTTP(w, r)
	})
}

// runServer is one run's http.Server and the end of its Serve.
type runServer struct {
	srv    interface{ Close() error }
	served chan struct{}
}

func (s *runServer) close() {
	_ = s.srv.Close()
	<-s.served
}

// bufConn is a connection whose first bytes were read into r.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite passes a half-close on (the runner forwards one).
func (c *bufConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// chanListener is a net.Listener fed by route.
type chanListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

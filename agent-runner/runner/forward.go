package runner

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/rs/zerolog"
)

// Placeholder is the credential claude gets: the host's credential proxy
// drops it and puts the real one on each request, so it is worthless
// anywhere else. (Same value as credproxy.Placeholder.)
const Placeholder = "bridged-proxy-placeholder-not-a-credential"

// forwarder serves 127.0.0.1:<port> (the container's own loopback) and
// forwards each connection to the host's credential-proxy socket, byte for
// byte: the HTTP stays end to end between claude and the proxy.
type forwarder struct {
	ln     net.Listener
	dial   func() (net.Conn, error)
	log    zerolog.Logger
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// startForwarder listens on a free loopback port and forwards to the
// host's proxy: its unix socket, or (addr set, the kubernetes engine) its
// TCP address, each connection started with the run's token line.
func startForwarder(socket, addr, token string, log zerolog.Logger) (*forwarder, error) {
	dial := func() (net.Conn, error) { return net.DialTimeout("unix", socket, 10*time.Second) }
	if addr != "" {
		dial = func() (net.Conn, error) {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				return nil, err
			}
			if _, err := io.WriteString(c, ipc.ProxyTokenLine+token+"\n"); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		}
		socket = addr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("API forwarder: listen on loopback: %w", err)
	}
	f := &forwarder{ln: ln, dial: dial, log: log.With().Str("part", "api-forwarder").Logger(), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	f.log.Debug().Str("addr", ln.Addr().String()).Str("socket", socket).Msg("API forwarder listening")
	return f, nil
}

// BaseURL is what claude gets as ANTHROPIC_BASE_URL.
func (f *forwarder) BaseURL() string { return "http://" + f.ln.Addr().String() }

// vars are claude's API variables: the base URL and a placeholder of the
// kind of credential the host holds (an API key unless it holds an OAuth
// token), so the CLI runs in the same mode as with the real one.
func (f *forwarder) vars(auth string) map[string]string {
	v := map[string]string{"ANTHROPIC_BASE_URL": f.BaseURL()}
	if auth == ipc.APIAuthOAuth {
		v["CLAUDE_CODE_OAUTH_TOKEN"] = Placeholder
	} else {
		v["ANTHROPIC_API_KEY"] = Placeholder
	}
	return v
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.log.Warn().Err(err).Msg("API forwarder stopped accepting")
			}
			return
		}
		if !f.track(c, true) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.serve(c)
	}
}

// track adds (or removes) a live connection; false once closed.
func (f *forwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		if f.closed {
			return false
		}
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
	return true
}

func (f *forwarder) serve(c net.Conn) {
	defer f.wg.Done()
	defer f.track(c, false)
	defer c.Close()
	u, err := f.dial()
	if err != nil {
		f.log.Warn().Err(err).Msg("API forwarder: the host's proxy does not answer")
		// A plain HTTP answer, so the CLI shows something sensible.
		body := `{"type":"error","error":{"type":"api_error","message":"bridged: the host's API proxy is unreachable from this container"}}`
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	if !f.track(u, true) {
		_ = u.Close()
		return
	}
	defer f.track(u, false)
	defer u.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass the half-close on: the request (or response) is complete.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	<-done
}

// Close stops listening and cuts every connection.
func (f *forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.ln.Close()
	f.wg.Wait()
}

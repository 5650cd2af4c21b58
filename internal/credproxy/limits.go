package credproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// What one container can make the proxy hold is bounded (docs/security.md,
// "Limits"). The defaults are far above what a real CLI uses: it keeps a
// handful of connections, one request per agent or subagent in flight, and
// bodies the API itself caps at 32 MB.
const (
	DefaultMaxConns    = 64
	DefaultMaxInFlight = 32
	DefaultMaxBody     = 32 << 20
	DefaultReadTimeout = time.Minute
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultLogEvery is the window of the refusal log: at most one line
	// per group and reason in it; the next line says how many it hid.
	DefaultLogEvery = 10 * time.Second
)

// Limits bound what one container can make the proxy hold. A zero field
// takes its default.
type Limits struct {
	// MaxConns is the number of connections open at once on one
	// container's socket; one more is closed as soon as it is accepted.
	MaxConns int
	// MaxInFlight is the number of requests of one group forwarded at
	// once; one more is answered 429 (rate_limit_error).
	MaxInFlight int
	// MaxBody is the largest request body forwarded; a larger one is
	// answered 413 (request_too_large).
	MaxBody int64
	// ReadTimeout is how long a request's headers, then its body, may take
	// to arrive.
	ReadTimeout time.Duration
	// IdleTimeout closes a connection that waits this long for its next
	// request, or whose reader takes nothing of a response for this long.
	IdleTimeout time.Duration
	// LogEvery is the refusal log's window (DefaultLogEvery).
	LogEvery time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.MaxBody <= 0 {
		l.MaxBody = DefaultMaxBody
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.LogEvery <= 0 {
		l.LogEvery = DefaultLogEvery
	}
	return l
}

// FDBound is the most file descriptors the proxy holds for containers
// containers at once under these limits: per container its socket, every
// connection it may open and an upstream connection per request in flight.
// The daemon adds its own (see cmd/bridged).
func (l Limits) FDBound(containers int) int {
	l = l.withDefaults()
	return containers * (1 + l.MaxConns + l.MaxInFlight)
}

// Refusal reasons: the refusal log is limited per group and reason.
const (
	reasonConns     = "connections"
	reasonInFlight  = "in-flight"
	reasonForbidden = "forbidden"
	reasonUpgrade   = "upgrade"
	reasonBody      = "body"
	reasonNoCred    = "no-credential"
	reasonAborted   = "aborted"
	reasonEncoded   = "encoded"
	reasonHeld      = "budget-held"
)

// limiter holds the proxy's shared limit state: requests in flight per
// group and the refusal log's windows.
type limiter struct {
	lim Limits
	now func() time.Time

	mu       sync.Mutex
	inFlight map[string]int
	logged   map[logKey]*logWindow
}

type logKey struct{ group, reason string }

type logWindow struct {
	start      time.Time
	suppressed int
}

func newLimiter(l Limits) *limiter {
	return &limiter{lim: l.withDefaults(), now: time.Now, inFlight: map[string]int{}, logged: map[logKey]*logWindow{}}
}

// acquire takes one of group's in-flight slots; false when all are taken.
func (l *limiter) acquire(group string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[group] >= l.lim.MaxInFlight {
		return false
	}
	l.inFlight[group]++
	return true
}

func (l *limiter) release(group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[group]--; l.inFlight[group] <= 0 {
		delete(l.inFlight, group)
	}
}

// allow says whether a line about group and reason may be logged now, and
// how many were held back since the last one. Keys are groups times a fixed
// set of reasons; windows long past are dropped so the map stays small.
func (l *limiter) allow(group, reason string) (bool, int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := logKey{group, reason}
	w := l.logged[k]
	if w != nil && now.Sub(w.start) < l.lim.LogEvery {
		w.suppressed++
		return false, 0
	}
	n := 0
	if w != nil {
		n = w.suppressed
	}
	if len(l.logged) > 1024 {
		for key, old := range l.logged {
			if now.Sub(old.start) >= l.lim.LogEvery && old.suppressed == 0 {
				delete(l.logged, key)
			}
		}
	}
	l.logged[k] = &logWindow{start: now}
	return true, n
}

// warn logs one refusal line unless the window of group and reason already
// has one; the next line written carries the count held back.
func (l *limiter) warn(log zerolog.Logger, group, reason string, fields func(*zerolog.Event), msg string) {
	ok, n := l.allow(group, reason)
	if !ok {
		return
	}
	ev := log.Warn().Str("reason_kind", reason)
	if n > 0 {
		ev = ev.Int("suppressed", n)
	}
	if fields != nil {
		fields(ev)
	}
	ev.Msg(msg)
}

// capListener closes a connection past max as soon as it is accepted: the
// descriptor lives for one accept and close, and the container's client sees
// its connection end at once.
type capListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func()
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			l.refused()
			continue
		}
		return &capConn{Conn: c, l: l}, nil
	}
}

type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// listen wraps a container's listener with the connection cap.
func (p *Proxy) listen(ln net.Listener, group, name string) net.Listener {
	return &capListener{Listener: ln, max: int64(p.lim.lim.MaxConns), refused: func() {
		p.lim.warn(p.log, group, reasonConns, func(e *zerolog.Event) {
			e.Str("group", group).Str("container", name).Int("limit", p.lim.lim.MaxConns)
		}, "proxy connection refused: the container's socket is at its connection cap")
	}}
}

// server is the http.Server of one container's socket: header and idle
// timeouts (the body's is set per request by guard).
func (p *Proxy) server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: p.lim.lim.ReadTimeout,
		IdleTimeout:       p.lim.lim.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// guard refuses, before next sees it, what the proxy never forwards
// (another path, method or host, CONNECT, an Upgrade), a request with no
// credential to add, a body over the cap and a request past the group's
// in-flight cap; every refusal is API-shaped and its log line rate-limited.
// What it lets through gets a read deadline for its body, a write deadline
// per write, and a response scrubbed of the credential; a stream cut in the
// middle is logged with its cause.
func (p *Proxy) guard(group, name string, next http.Handler) http.Handler {
	lim := p.lim.lim
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(start.Add(lim.IdleTimeout))
		gw := &guardWriter{ResponseWriter: w, rc: rc, stall: lim.IdleTimeout, cred: []byte(p.cred)}
		fields := func(e *zerolog.Event) {
			e.Str("group", group).Str("container", name).Str("method", r.Method).Str("path", r.URL.Path)
		}
		gw.onOpaque = func(enc string) {
			p.lim.warn(p.log, group, reasonEncoded, func(e *zerolog.Event) { fields(e); e.Str("encoding", enc) },
				"API response not passed on: the upstream encoded its body, which cannot be checked for the credential")
		}
		refuse := func(reason string, status int, typ, msg string, extra func(*zerolog.Event)) {
			p.lim.warn(p.log, group, reason, func(e *zerolog.Event) {
				fields(e)
				e.Int("status", status)
				if extra != nil {
					extra(e)
				}
			}, "API request refused")
			writeError(gw, status, typ, "bridged credential proxy: "+msg)
		}
		if isUpgrade(r) {
			refuse(reasonUpgrade, http.StatusForbidden, "permission_error",
				fmt.Sprintf("protocol upgrades are not forwarded; %s %s with Upgrade %q refused", r.Method, r.URL.Path, r.Header.Get("Upgrade")), nil)
			return
		}
		if reason := refused(r); reason != "" {
			refuse(reasonForbidden, http.StatusForbidden, "permission_error", reason, func(e *zerolog.Event) { e.Str("reason", reason) })
			return
		}
		if p.mode == ModeNone {
			p.lim.warn(p.log, group, reasonNoCred, fields, "API request answered 401: no credential configured")
			writeError(gw, http.StatusUnauthorized, "authentication_error", NoCredentialMessage)
			return
		}
		if r.ContentLength > lim.MaxBody {
			refuse(reasonBody, http.StatusRequestEntityTooLarge, "request_too_large",
				fmt.Sprintf("the request body (%d bytes) is over the proxy's limit of %d bytes", r.ContentLength, lim.MaxBody),
				func(e *zerolog.Event) { e.Int64("bytes", r.ContentLength).Int64("limit", lim.MaxBody) })
			return
		}
		if !p.lim.acquire(group) {
			gw.Header().Set("Retry-After", "1")
			refuse(reasonInFlight, http.StatusTooManyRequests, "rate_limit_error",
				fmt.Sprintf("this group already has %d API requests in flight, the proxy's limit", lim.MaxInFlight),
				func(e *zerolog.Event) { e.Int("limit", lim.MaxInFlight) })
			return
		}
		defer p.lim.release(group)
		caller := r.Context()
		if r.Body != nil && r.Body != http.NoBody {
			// The body must arrive within the read timeout; the deadline is
			// lifted at its end (or when the answer starts), so the wait for
			// a long stream is not cut. A body without a declared length
			// that runs past the cap cancels the upstream request, which
			// never gets it whole, and is answered 413.
			_ = rc.SetReadDeadline(start.Add(lim.ReadTimeout))
			ctx, cancel := context.WithCancel(caller)
			defer cancel()
			gw.body = &bodyGuard{rc: rc, timeout: lim.ReadTimeout, cancel: cancel}
			r = r.WithContext(ctx)
			r.Body = &readGuard{ReadCloser: http.MaxBytesReader(gw, r.Body, lim.MaxBody), g: gw.body}
		}
		defer func() {
			if gw.body != nil {
				gw.body.end()
			}
			v := recover()
			if v == nil {
				if gw.body != nil && gw.body.tooLarge() && !gw.wroteHeader {
					refuse(reasonBody, http.StatusRequestEntityTooLarge, "request_too_large",
						fmt.Sprintf("the request body is over the proxy's limit of %d bytes", lim.MaxBody),
						func(e *zerolog.Event) { e.Int64("limit", lim.MaxBody) })
				}
				gw.finish()
				return
			}
			if v == http.ErrAbortHandler && gw.ended {
				// The container had the whole stream: what broke off after
				// its message_stop (the CLI closes a stream it has read to
				// the end) cut nothing.
				p.log.Debug().Str("group", group).Str("container", name).Int64("bytes", gw.written).
					Dur("took", time.Since(start)).Msg(completeClosed)
			} else if v == http.ErrAbortHandler {
				cause := "the upstream broke off the response"
				switch {
				case gw.werr != nil && !peerClosed(gw.werr):
					cause = "the container stopped reading the response: " + gw.werr.Error()
				case gw.werr != nil || caller.Err() != nil:
					// A write the closed connection refused is the same
					// departure as the cancelled request: whichever the
					// proxy saw first.
					cause = "the container went away"
				}
				p.lim.warn(p.log, group, reasonAborted, func(e *zerolog.Event) {
					fields(e)
					e.Int("status", gw.status).Int64("bytes", gw.written).Dur("took", time.Since(start)).Str("cause", cause)
				}, "API response stream aborted")
			}
			panic(v)
		}()
		next.ServeHTTP(gw, r)
	})
}

// completeClosed is the debug line of a stream that broke off after its
// message_stop: complete, so no abort.
const completeClosed = "API response stream closed after its end"

// isUpgrade reports a request asking to switch protocols (WebSocket, h2c).
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return true
	}
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// bodyGuard lifts a request's body read deadline once: at the body's end or
// when the answer starts (a long stream is not cut by it). A body the
// handler left unfinished gets a fresh deadline as the handler returns, for
// the server's own read of its rest.
type bodyGuard struct {
	rc      *http.ResponseController
	timeout time.Duration
	cancel  context.CancelFunc // cancels the upstream request
	mu      sync.Mutex
	lifted  bool
	eof     bool
	over    bool // the body ran past the cap
}

func (b *bodyGuard) tooLarge() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

func (b *bodyGuard) lift(eof bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.eof = b.eof || eof
	if !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// end runs as the handler returns; nothing touches the deadline after it.
func (b *bodyGuard) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.eof {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.lifted, b.eof = true, true
}

type readGuard struct {
	io.ReadCloser
	g *bodyGuard
}

func (r *readGuard) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	var mbe *http.MaxBytesError
	switch {
	case err == io.EOF:
		r.g.lift(true)
	case errors.As(err, &mbe):
		r.g.mu.Lock()
		r.g.over = true
		r.g.mu.Unlock()
		r.g.cancel()
	}
	return n, err
}

// guardWriter is the response writer the proxy's handler writes to: it
// scrubs the credential from headers and body (holding back only a tail that
// could be the start of it, so a split credential is caught and a stream is
// never delayed past its event's end), sets a write deadline before each
// write, and remembers what a stream-abort log line needs.
type guardWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	cred  []byte
	held  []byte
	body  *bodyGuard

	wroteHeader bool
	status      int
	written     int64
	werr        error
	// ended: the stream's message_stop event reached the container (tail
	// holds the end of the last write, for a marker split across two).
	ended bool
	tail  []byte
	// opaque: the upstream's body is encoded, so it cannot be checked for
	// the credential; a 502 went out instead and the body is dropped.
	opaque   bool
	onOpaque func(encoding string)
}

func (g *guardWriter) WriteHeader(code int) {
	if g.wroteHeader {
		g.ResponseWriter.WriteHeader(code)
		return
	}
	if code >= 200 {
		g.wroteHeader, g.status = true, code
		if g.body != nil {
			g.body.lift(false)
		}
	}
	if enc := g.Header().Get("Content-Encoding"); code >= 200 && len(g.cred) > 0 && enc != "" && !strings.EqualFold(enc, "identity") {
		g.opaque, g.status = true, http.StatusBadGateway
		for k := range g.Header() {
			delete(g.Header(), k)
		}
		if g.onOpaque != nil {
			g.onOpaque(enc)
		}
		writeError(g.ResponseWriter, http.StatusBadGateway, "api_error",
			"bridged credential proxy: the upstream sent an encoded ("+enc+") body, which the proxy cannot check for the credential; it was not passed on")
		return
	}
	if len(g.cred) > 0 {
		cred := string(g.cred)
		for k, vs := range g.Header() {
			for i, v := range vs {
				if strings.Contains(v, cred) {
					vs[i] = strings.ReplaceAll(v, cred, string(mask(len(cred))))
				}
			}
			g.Header()[k] = vs
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardWriter) Write(b []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	if g.opaque {
		return len(b), nil
	}
	if len(g.cred) == 0 {
		return g.write(b)
	}
	buf := b
	if len(g.held) > 0 || bytes.Contains(b, g.cred) {
		buf = append(append([]byte(nil), g.held...), b...)
		g.held = g.held[:0]
		scrub(buf, g.cred)
	}
	keep := partialTail(buf, g.cred)
	if keep > 0 {
		g.held = append(g.held[:0], buf[len(buf)-keep:]...)
	}
	if _, err := g.write(buf[:len(buf)-keep]); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (g *guardWriter) write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	_ = g.rc.SetWriteDeadline(time.Now().Add(g.stall))
	n, err := g.ResponseWriter.Write(b)
	g.written += int64(n)
	g.sawEnd(b[:n])
	if err != nil && g.werr == nil {
		g.werr = err
	}
	return n, err
}

// streamEnd is what a stream's last event, message_stop, carries: inside
// a JSON string its quotes would be escaped, so only the event itself has it.
var streamEnd = []byte(`"type":"message_stop"`)

// sawEnd notes whether b, written to the container after what came
// before, completes the stream's message_stop.
func (g *guardWriter) sawEnd(b []byte) {
	if g.ended || len(b) == 0 {
		return
	}
	n := len(streamEnd) - 1
	if len(b) >= n {
		// The marker either straddles the tail and b's start, or is in b.
		g.ended = bytes.Contains(append(g.tail, b[:n]...), streamEnd) || bytes.Contains(b, streamEnd)
		g.tail = append(g.tail[:0], b[len(b)-n:]...)
		return
	}
	g.tail = append(g.tail, b...)
	g.ended = bytes.Contains(g.tail, streamEnd)
	g.tail = g.tail[max(len(g.tail)-n, 0):]
}

func (g *guardWriter) Flush() {
	_ = g.rc.SetWriteDeadline(time.Now().Add(g.stall))
	if err := g.rc.Flush(); err != nil && g.werr == nil && !errors.Is(err, http.ErrNotSupported) {
		g.werr = err
	}
}

// finish writes what was held back: it was not the credential.
func (g *guardWriter) finish() {
	if len(g.held) > 0 {
		_, _ = g.write(g.held)
		g.held = nil
	}
}

func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// scrub overwrites every occurrence of cred in b with a mask of the same
// length (a Content-Length stays true).
func scrub(b, cred []byte) {
	m := mask(len(cred))
	for i := 0; ; {
		j := bytes.Index(b[i:], cred)
		if j < 0 {
			return
		}
		copy(b[i+j:], m)
		i += j + len(cred)
	}
}

// partialTail is the length of the longest end of b that is a proper start
// of cred (0 when none).
func partialTail(b, cred []byte) int {
	from := max(0, len(b)-len(cred)+1)
	for i := from; i < len(b); i++ {
		if b[i] == cred[0] && bytes.HasPrefix(cred, b[i:]) {
			return len(b) - i
		}
	}
	return 0
}

const maskText = "[credential removed by bridged]"

// mask is n bytes saying the credential was removed (cut or padded with *).
func mask(n int) []byte {
	m := []byte(maskText)
	if n <= len(m) {
		return m[:n]
	}
	return append(m, bytes.Repeat([]byte{'*'}, n-len(m))...)
}

// peerClosed says whether a write failed because the other end closed the
// connection (rather than stalling until the write's deadline).
func peerClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

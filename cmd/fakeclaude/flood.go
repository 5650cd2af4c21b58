package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// floodSocket is where a container sees its credential-proxy socket
// (ipc.ContainerProxyDir/ipc.ProxySocketName).
const floodSocket = "/run/bridged-proxy/api.sock"

// floodDirective plays an agent attacking the daemon through its proxy
// socket (fake:flood N). It first sends N requests for a path the proxy
// refuses, each on a new connection, then opens N connections and holds them
// without a byte sent. With all of them open it writes flood-held in its
// working directory and waits (up to ten minutes) for a file flood-release
// there; then it closes them all. The reply counts what happened: how many
// connections were open and how many of those the proxy had closed by then.
func (f *fake) floodDirective(ctx context.Context, arg string) string {
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || n < 1 || n > 100000 {
		return fmt.Sprintf("fake: bad flood count %q", arg)
	}
	sock := floodSocket
	dial := func() (net.Conn, error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		return d.DialContext(ctx, "unix", sock)
	}
	// Refused requests, one per connection.
	answered, cut := 0, 0
	for range n {
		c, err := dial()
		if err != nil {
			cut++
			continue
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(c, "GET /v1/models HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			answered++
		} else {
			cut++
		}
		_ = c.Close()
	}
	// Idle connections, held.
	var conns []net.Conn
	dialErrs := 0
	var firstErr error
	for range n {
		c, err := dial()
		if err != nil {
			dialErrs++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	_ = os.WriteFile(filepath.Join(f.cwd, "flood-held"), []byte(strconv.Itoa(len(conns))), 0o644)
	release := filepath.Join(f.cwd, "flood-release")
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := os.Stat(release); err == nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	closed := 0
	for _, c := range conns {
		if closedByPeer(c) {
			closed++
		}
	}
	msg := fmt.Sprintf("flood: refused requests answered %d, cut %d; connections opened %d, closed by the proxy %d, dial errors %d",
		answered, cut, len(conns), closed, dialErrs)
	if firstErr != nil {
		msg += " (first: " + firstErr.Error() + ")"
	}
	return msg
}

// closedByPeer reports whether the other end of c has closed it: a peek
// that does not wait finds the end of the stream (or an error) rather than
// no data yet. A read with a short deadline would not do on a busy
// machine: a deadline that passes before the read begins fails it without
// a look at the socket, and an open connection is what it would report.
func closedByPeer(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	one := make([]byte, 1)
	_ = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), one, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = err == nil && n == 0 || err != nil && !errors.Is(err, syscall.EAGAIN)
		return true
	})
	return closed
}

package dashboard

import (
	"net"
	"strconv"
)

// CheckAddr says why addr cannot be Options.Addr (nil when it can): "" is
// off, else the dashboard is never reachable from another machine, so addr
// is a loopback host and port. Its error is ErrNotLoopback, and says why.
func CheckAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return notLoopback("want a loopback address and port such as 127.0.0.1:8080")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return notLoopback("want a port from 0 to 65535, as in 127.0.0.1:8080")
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return notLoopback("the dashboard listens on a loopback address only (127.0.0.1 or [::1], e.g. 127.0.0.1:8080): reach it from elsewhere through an SSH tunnel")
	}
	return nil
}

// notLoopback is ErrNotLoopback with its reason as its text.
type notLoopback string

func (e notLoopback) Error() string        { return string(e) }
func (e notLoopback) Is(target error) bool { return target == ErrNotLoopback }

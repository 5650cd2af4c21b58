package e2e

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // holds the daemon's write lock from outside
)

// notification is one datagram the daemon sent to NOTIFY_SOCKET.
type notification struct {
	lines []string
	// answered: the control API answered when it arrived.
	answered bool
}

func (n notification) has(line string) bool { return slices.Contains(n.lines, line) }

// fakeSystemd listens on a NOTIFY_SOCKET as systemd does for a Type=notify
// service. For READY=1 it checks at once whether the control API answers.
func fakeSystemd(t *testing.T, e *env) (socket string, got <-chan notification) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn") // a socket path must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket = filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if e.cred != nil {
		_ = os.Chmod(dir, 0o755)
		_ = os.Chmod(socket, 0o777)
	}
	ch := make(chan notification, 10000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			nt := notification{lines: strings.Split(string(buf[:n]), "\n")}
			if nt.has("READY=1") {
				nt.answered = e.api("GET", "/healthz", nil, nil) == nil
			}
			ch <- nt
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return socket, ch
}

// countWatchdog drains got for d and counts WATCHDOG=1.
func countWatchdog(got <-chan notification, d time.Duration) int {
	timer := time.NewTimer(d)
	defer timer.Stop()
	n := 0
	for {
		select {
		case nt := <-got:
			if nt.has("WATCHDOG=1") {
				n++
			}
		case <-timer.C:
			return n
		}
	}
}

// Under systemd (Type=notify, WatchdogSec=): READY=1 once the control
// socket answers, a readable STATUS=, WATCHDOG=1 every half WATCHDOG_USEC,
// none while the store is wedged (another process holds its write lock),
// pings again once it is free, and STOPPING=1 on SIGTERM.
func TestE2ESystemdNotify(t *testing.T) {
	parallel(t, timed)
	e := newEnv(t)
	socket, got := fakeSystemd(t, e)
	e.extraEnv = append(e.extraEnv, "NOTIFY_SOCKET="+socket, "WATCHDOG_USEC=400000") // ping every 200ms
	d := e.start()

	var ready notification
	timeout := time.After(30 * time.Second)
	for ready.lines == nil {
		select {
		case nt := <-got:
			if nt.has("READY=1") {
				ready = nt
			} else if nt.has("WATCHDOG=1") {
				t.Fatalf("WATCHDOG=1 before READY=1")
			}
		case <-timeout:
			t.Fatalf("no READY=1 within 30s\n%s", tail(d.logs(), 40))
		}
	}
	if !ready.answered {
		t.Error("READY=1 arrived while the control API did not answer")
	}
	i := slices.IndexFunc(ready.lines, func(l string) bool { return strings.HasPrefix(l, "STATUS=WhatsApp ") })
	if i < 0 || !strings.Contains(ready.lines[i], "0 containers running") {
		t.Errorf("READY=1 came with %q; want a STATUS= line naming WhatsApp's state and the containers", ready.lines)
	}

	// About 10; a loaded machine may delay a tick, never add one.
	if n := countWatchdog(got, 2*time.Second); n < 4 || n > 12 {
		t.Errorf("WATCHDOG=1 in 2s with WATCHDOG_USEC=400ms: %d; want about 10", n)
	}

	// Wedge the store: another process holds its write lock (taken once
	// the daemon's own probe lets go of it).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "store", "bridged.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	countWatchdog(got, 500*time.Millisecond) // a probe that began before the lock
	if n := countWatchdog(got, 2*time.Second); n != 0 {
		t.Errorf("WATCHDOG=1 while the store's write lock is held elsewhere: %d in 2s; want none", n)
	}
	if !d.waitLog("the systemd watchdog is not pinged", 5*time.Second) {
		t.Error("the daemon did not log why it stopped pinging the watchdog")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countWatchdog(got, 2*time.Second); n < 2 {
		t.Errorf("WATCHDOG=1 once the lock is free: %d in 2s; want the pings back", n)
	}

	d.stop(t)
	// The datagrams were sent before the exit; the reader may lag behind.
	timeout = time.After(5 * time.Second)
	for stopping := false; !stopping; {
		select {
		case nt := <-got:
			stopping = nt.has("STOPPING=1")
		case <-timeout:
			t.Fatal("no STOPPING=1 from the daemon stopped by SIGTERM")
		}
	}
}

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/ipchost/ipchosttest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// channelHost is the daemon's side of a run on the kubernetes engine: the
// real IPC host, with the family group registered, served on the
// credential proxy's TCP channel, and one run's token.
type channelHost struct {
	db    *store.DB
	home  *home.Home
	tcp   *credproxy.TCP
	token string
}

func newChannelHost(t testing.TB, upstream string) *channelHost {
	t.Helper()
	dir := t.TempDir()
	db := storetest.OpenHome(t, dir)
	if _, err := db.Groups.Add(context.Background(), store.Group{Chat: "120363001@g.us", Folder: "family", Name: "Family", Trigger: "@Andy"}); err != nil {
		t.Fatal(err)
	}
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	h, err := ipchost.New(ipchost.Config{Trees: hm, AssistantName: "Andy"}, db, ipchosttest.Outbox{DB: db}, nil, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	p, err := credproxy.New(credproxy.Config{Upstream: upstream, APIKey: secretKey, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := p.ListenTCP("127.0.0.1:0", "", h.Channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	token, closeFn, err := tcp.OpenTCP("family", "bridged-family-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	return &channelHost{db: db, home: hm, tcp: tcp, token: token}
}

// start runs the runner of the token's run, the proxy's address in its
// environment as on the kubernetes engine. Its IPC directory is its own,
// which the host never reads: like a network volume written on another
// node, it carries nothing between them.
func (c *channelHost) start(t *testing.T, prompt string) *agent {
	t.Helper()
	in := defaultInput(prompt)
	in.ProxyToken = c.token
	return startAgent(t, in, agentOpts{env: []string{ipc.EnvAPIAddr + "=" + c.tcp.Addr(), ipc.EnvAPIAuth + "=" + ipc.APIAuthAPIKey}})
}

// On the kubernetes engine the agent's tool call, the host's follow-up
// input and its close cross the run's channel: the message is committed by
// the real IPC host for the token's group, the follow-up reaches the same
// claude, the close ends the run, and no file of the IPC directory was
// used either way.
func TestToolCallAndFollowUpOverTheChannel(t *testing.T) {
	c := newChannelHost(t, "http://127.0.0.1:1")
	a := c.start(t, `fake:tool send_message {"text":"hello across nodes"}`)
	res := a.nextOf(ipc.EventResult)
	if res.IsError || !strings.Contains(res.Text, "Message queued for delivery to this chat.") {
		t.Fatalf("result %q; want the host's answer", res.Text)
	}
	out, err := c.db.Outbox.Pending(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Group != "family" || out[0].Chat != "120363001@g.us" || out[0].Text != "hello across nodes" {
		t.Fatalf("outbox %+v; want the message once, to family's chat", out)
	}
	if _, err := c.home.WriteInput("family", "fake:pid"); err != nil {
		t.Fatal(err)
	}
	res = a.nextOf(ipc.EventResult)
	if !strings.HasPrefix(res.Text, "pid=") {
		t.Fatalf("result %q; want the follow-up's answer", res.Text)
	}
	start := time.Now()
	if err := c.home.WriteClose("family"); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d after the close; want 0", code)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the close took %v", d)
	}
	in, err := c.home.Input("family")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if names, _, _ := in.List(10); len(names) != 0 {
		t.Errorf("host input left after the run took it: %v", names)
	}
	for _, dir := range []string{a.ipc.Requests(), a.ipc.Responses(), a.ipc.Input()} {
		if names, _ := ipc.List(dir); len(names) != 0 {
			t.Errorf("%s holds %v; want nothing through the files", dir, names)
		}
	}
}

// middlebox sits between the runner and the daemon's channel, as a node's
// network does: cut drops every connection it carries, and with dropAck
// set it drops the next connection that carries an acknowledgement, before
// the daemon sees it.
type middlebox struct {
	ln      net.Listener
	to      string
	dropAck atomic.Bool
	mu      sync.Mutex
	conns   map[net.Conn]bool
}

func newMiddlebox(t *testing.T, to string) *middlebox {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &middlebox{ln: ln, to: to, conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.carry(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		m.cut()
	})
	return m
}

func (m *middlebox) track(cs ...net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cs {
		m.conns[c] = true
	}
}

func (m *middlebox) carry(c net.Conn) {
	u, err := net.Dial("tcp", m.to)
	if err != nil {
		c.Close()
		return
	}
	m.track(c, u)
	go func() {
		_, _ = io.Copy(c, u)
		c.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && bytes.Contains(buf[:n], []byte("POST "+ipc.ChannelAck+" ")) && m.dropAck.CompareAndSwap(true, false) {
			break
		}
		if n > 0 {
			if _, werr := u.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
	u.Close()
}

// cut drops every connection carried so far.
func (m *middlebox) cut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.conns {
		c.Close()
	}
	m.conns = map[net.Conn]bool{}
}

// The channel's connections drop (a node's network): the runner opens the
// input stream again and gets what the daemon wrote meanwhile, and a
// follow-up whose acknowledgement was lost, sent again by the new stream,
// reaches claude once and is then acknowledged.
func TestChannelDropsLoseAndRepeatNothing(t *testing.T) {
	c := newChannelHost(t, "http://127.0.0.1:1")
	mb := newMiddlebox(t, c.tcp.ListenAddr())
	stdinLog := filepath.Join(t.TempDir(), "stdin.log")
	in := defaultInput("fake:reply ready")
	in.ProxyToken = c.token
	a := startAgent(t, in, agentOpts{env: []string{"FAKECLAUDE_STDIN_LOG=" + stdinLog, ipc.EnvAPIAddr + "=" + mb.ln.Addr().String(), ipc.EnvAPIAuth + "=" + ipc.APIAuthAPIKey}})
	if res := a.nextOf(ipc.EventResult); res.Text != "ready" {
		t.Fatalf("result %q", res.Text)
	}
	inputDir := filepath.Join(c.home.Layout().DataDir(), "ipc", "family", ipc.InputDir)
	left := func() []string {
		names, _ := ipc.List(inputDir)
		return names
	}

	mb.dropAck.Store(true)
	if _, err := c.home.WriteInput("family", "fake:reply once"); err != nil {
		t.Fatal(err)
	}
	if res := a.nextOf(ipc.EventResult); res.Text != "once" {
		t.Fatalf("result %q; want the follow-up's", res.Text)
	}
	if n := len(left()); n != 1 {
		t.Fatalf("the daemon holds %d inputs; want the one whose acknowledgement was dropped", n)
	}
	mb.cut()
	waitDir(t, 10*time.Second, inputDir, "the input acknowledged over a new stream", func() bool { return len(left()) == 0 })

	mb.cut()
	if _, err := c.home.WriteInput("family", "fake:reply after"); err != nil {
		t.Fatal(err)
	}
	if res := a.nextOf(ipc.EventResult); res.Text != "after" {
		t.Fatalf("result %q; want the follow-up written after the drop", res.Text)
	}
	if err := c.home.WriteClose("family"); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
	data, err := os.ReadFile(stdinLog)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "fake:reply once"); n != 1 {
		t.Errorf("claude read the follow-up %d times; want once:\n%s", n, data)
	}
}

package ipchost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// chanEnv is the IPC host served on the credential proxy's TCP channel, as
// the daemon serves it to the kubernetes engine's Pods.
type chanEnv struct {
	*env
	tcp *credproxy.TCP
}

func newChanEnv(t *testing.T) *chanEnv {
	t.Helper()
	e := newEnv(t)
	p, err := credproxy.New(credproxy.Config{Upstream: "http://127.0.0.1:1", APIKey: "sk-ant-test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := p.ListenTCP("127.0.0.1:0", "", e.h.Channel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	return &chanEnv{env: e, tcp: tcp}
}

// open opens a run of folder's group and returns a client of its channel.
func (c *chanEnv) open(t *testing.T, folder string) (*chanClient, func()) {
	t.Helper()
	token, closeFn, err := c.tcp.OpenTCP(folder, "bridged-"+folder+"-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	return &chanClient{addr: c.tcp.ListenAddr(), token: token}, closeFn
}

// chanClient speaks to the channel as the runner's forwarder does: each
// connection opened with the token line.
type chanClient struct{ addr, token string }

func (c *chanClient) dial() (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, ipc.ProxyTokenLine+c.token+"\n"); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (c *chanClient) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return c.dial() },
	}}
}

// post sends body to path and returns the status and the answer's body.
func (c *chanClient) post(t *testing.T, path string, body []byte) (int, []byte, error) {
	t.Helper()
	resp, err := c.client().Post("http://bridged"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// call sends req and decodes the answer.
func (c *chanClient) call(t *testing.T, req ipc.Request) (int, ipc.Response) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return c.callRaw(t, body)
}

func (c *chanClient) callRaw(t *testing.T, body []byte) (int, ipc.Response) {
	t.Helper()
	status, data, err := c.post(t, ipc.ChannelRequest, body)
	if err != nil {
		t.Fatalf("post request: %v", err)
	}
	var resp ipc.Response
	if err := json.Unmarshal(data, &resp); err != nil {
		t.Fatalf("answer %q (%d): %v", data, status, err)
	}
	return status, resp
}

func sendReq(text string) ipc.Request {
	return ipc.NewRequest(ipc.SendMessageArgs{Text: text})
}

// A request over the channel acts as the token's group, and only as it:
// its message goes to that group's chat, another group's chat or task is
// refused as from a request file, and a body that names a group is
// malformed, not obeyed.
func TestChannelRequestActsAsTheTokensGroup(t *testing.T) {
	c := newChanEnv(t)
	family, _ := c.open(t, "family")

	status, resp := family.call(t, sendReq("hello over the channel"))
	if status != http.StatusOK || !resp.OK {
		t.Fatalf("send_message: %d %+v; want it carried out", status, resp)
	}
	out := c.outbox(t)
	if len(out) != 1 || out[0].Chat != chatOf("family") || out[0].Group != "family" || out[0].Text != "hello over the channel" {
		t.Fatalf("outbox %+v; want one message to family's chat", out)
	}

	before := c.snapshot(t)
	_, resp = family.call(t, ipc.NewRequest(ipc.SendMessageArgs{Text: "to main", TargetChat: string(chatOf("main"))}))
	if resp.OK || !strings.Contains(resp.Error, "refused") {
		t.Errorf("send_message to main's chat from family: %+v; want refused", resp)
	}
	_, resp = family.call(t, mustRequest(t, ipc.TypeCancelTask, c.tasks["main"].ID))
	if resp.OK || !strings.Contains(resp.Error, "not found") {
		t.Errorf("cancel_task of main's task from family: %+v; want not found", resp)
	}
	status, resp = family.callRaw(t, []byte(`{"id":"r1","type":"send_message","group":"main","args":{"text":"as main"}}`))
	if status != http.StatusBadRequest || resp.OK || !strings.Contains(resp.Error, "malformed request") {
		t.Errorf("a body naming main: %d %+v; want malformed", status, resp)
	}
	if after := c.snapshot(t); after != before {
		t.Errorf("refused requests changed something:\n%s\n%s", before, after)
	}
}

// What is not a well-formed request of a live run gets a clear refusal,
// never an answer for another run, and the host goes on answering.
func TestChannelRefusesWhatIsNotARequestOfALiveRun(t *testing.T) {
	c := newChanEnv(t)
	family, endRun := c.open(t, "family")

	t.Run("wrong token", func(t *testing.T) {
		forged := &chanClient{addr: family.addr, token: strings.Repeat("0", len(family.token))}
		if _, _, err := forged.post(t, ipc.ChannelRequest, []byte(`{}`)); err == nil {
			t.Error("a wrong token got an answer; want the connection closed")
		}
	})
	t.Run("oversized", func(t *testing.T) {
		big := fmt.Sprintf(`{"id":"big","type":"send_message","args":{"text":%q}}`, strings.Repeat("x", MaxRequestBytes))
		status, resp := family.callRaw(t, []byte(big))
		if status != http.StatusRequestEntityTooLarge || resp.OK || !strings.Contains(resp.Error, "over 1048576 bytes") {
			t.Errorf("oversized: %d %+v; want 413 with the bound", status, resp)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, body := range []string{`not json`, `{"id":"../x","type":"send_message","args":{"text":"a"}}`,
			`{"id":"m1","type":"launch_missiles","args":{}}`, `{"id":"m2","type":"send_message","args":{"text":""}}`} {
			status, resp := family.callRaw(t, []byte(body))
			if status != http.StatusBadRequest || resp.OK || !strings.HasPrefix(resp.Error, "malformed request") {
				t.Errorf("%s: %d %+v; want 400 malformed", body, status, resp)
			}
		}
		status, data, err := family.post(t, "/ipc/../v1/messages", []byte(`{}`))
		if err == nil && status == http.StatusOK {
			t.Errorf("a path outside the channel's: %d %s", status, data)
		}
	})
	if len(c.outbox(t)) != 0 {
		t.Fatalf("refused requests queued messages: %+v", c.outbox(t))
	}
	if status, resp := family.call(t, sendReq("still here")); status != http.StatusOK || !resp.OK {
		t.Fatalf("after the refusals: %d %+v; want the host answering", status, resp)
	}
	t.Run("ended run", func(t *testing.T) {
		endRun()
		if _, _, err := family.post(t, ipc.ChannelRequest, []byte(`{}`)); err == nil {
			t.Error("the token of an ended run got an answer; want the connection closed")
		}
	})
	if n := len(c.outbox(t)); n != 1 {
		t.Errorf("%d messages queued; want the one live request's", n)
	}
}

// gatedMessenger holds each SendMessage until its gate opens, telling
// entered when one waits.
type gatedMessenger struct {
	*fakeMessenger
	entered chan string
	gate    chan struct{}
}

func (m *gatedMessenger) SendMessage(ctx context.Context, unit store.Unit, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error) {
	select {
	case m.entered <- folder:
	default: // a flood: the first ones are told
	}
	<-m.gate
	return m.fakeMessenger.SendMessage(ctx, unit, chat, text, origin, folder)
}

func newGatedChanEnv(t *testing.T) (*chanEnv, *gatedMessenger) {
	t.Helper()
	c := newChanEnv(t)
	gm := &gatedMessenger{fakeMessenger: c.msg, entered: make(chan string, 8), gate: make(chan struct{})}
	h, err := New(Config{Trees: c.h.home, Timezone: c.loc, AssistantName: "Andy", Sweep: time.Hour}, c.db, gm, c.waker, c.refresh, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	h.now = func() time.Time { return now }
	c.h = h
	p, err := credproxy.New(credproxy.Config{Upstream: "http://127.0.0.1:1", APIKey: "sk-ant-test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if c.tcp, err = p.ListenTCP("127.0.0.1:0", "", h.Channel); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.tcp.Close() })
	return c, gm
}

func waitEntered(t *testing.T, gm *gatedMessenger) string {
	t.Helper()
	select {
	case f := <-gm.entered:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no SendMessage began within 10s")
	}
	return ""
}

// A request whose connection dropped before its answer is sent again by
// the runner with the same id: it is carried out once, while the first
// sending is still being carried out and after, and a later run that
// sends the id again gets the recorded answer.
func TestChannelRequestSentAgainIsCarriedOutOnce(t *testing.T) {
	c, gm := newGatedChanEnv(t)
	family, _ := c.open(t, "family")
	req := sendReq("once only")
	body, _ := json.Marshal(req)

	// The first sending: the connection drops while it is carried out.
	conn, err := family.dial()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: bridged\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", ipc.ChannelRequest, len(body), body)
	waitEntered(t, gm)
	conn.Close()

	// Sent again meanwhile: it waits for the first one's answer.
	type answer struct {
		status int
		resp   ipc.Response
	}
	again := make(chan answer, 1)
	go func() {
		status, resp := family.call(t, req)
		again <- answer{status, resp}
	}()
	select {
	case f := <-gm.entered:
		t.Fatalf("the request was carried out a second time (for %s) while the first was in flight", f)
	case a := <-again:
		t.Fatalf("answered %+v before the first sending was carried out", a)
	case <-time.After(200 * time.Millisecond): // nothing may happen: a bounded look
	}
	close(gm.gate)
	a := <-again
	if a.status != http.StatusOK || !a.resp.OK {
		t.Fatalf("sent again: %d %+v; want the first sending's answer", a.status, a.resp)
	}
	first := decodeData[ipc.SendResult](t, a.resp)

	_, third := family.call(t, req)
	if !third.OK || decodeData[ipc.SendResult](t, third).OutboxID != first.OutboxID {
		t.Errorf("sent a third time: %+v; want the same answer (outbox %d)", third, first.OutboxID)
	}
	next, _ := c.open(t, "family")
	_, later := next.call(t, req)
	if !later.OK || decodeData[ipc.SendResult](t, later).OutboxID != first.OutboxID {
		t.Errorf("sent by a later run: %+v; want the recorded answer (outbox %d)", later, first.OutboxID)
	}
	if out := c.outbox(t); len(out) != 1 {
		t.Errorf("outbox %+v; want the message once", out)
	}
	if n := len(gm.sent()); n != 1 {
		t.Errorf("SendMessage called %d times; want once", n)
	}
}

// One group flooding the channel while its first request waits holds up
// its own requests only: another group's are answered meanwhile, and the
// flood's are answered once the wait ends.
func TestChannelGroupWaitingDoesNotHoldUpAnother(t *testing.T) {
	c, gm := newGatedChanEnv(t)
	family, _ := c.open(t, "family")
	work, _ := c.open(t, "work")
	const flood = 100
	answered := make(chan bool, flood)
	for i := range flood {
		go func() {
			body, _ := json.Marshal(sendReq(fmt.Sprintf("flood %d", i)))
			resp, err := family.client().Post("http://bridged"+ipc.ChannelRequest, "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
			answered <- err == nil && resp.StatusCode == http.StatusOK
		}()
	}
	waitEntered(t, gm)
	status, resp := work.call(t, ipc.NewRequest(ipc.ListTasksArgs{}))
	if status != http.StatusOK || !resp.OK {
		t.Errorf("work's list_tasks while family floods: %d %+v", status, resp)
	}
	close(gm.gate)
	ok := 0
	for range flood {
		if <-answered {
			ok++
		}
	}
	// Past the run's connection cap (64) a connection is refused; each
	// one let in is answered.
	t.Logf("%d of the flood's %d requests answered", ok, flood)
	if out := len(c.outbox(t)); ok == 0 || out != ok {
		t.Errorf("%d of the flood answered, %d messages queued; want every answered one queued once", ok, out)
	}
}

// stream reads the input stream's items as they come.
type stream struct {
	body  io.Closer
	items chan ipc.ChannelItem
}

func (c *chanClient) stream(t *testing.T) *stream {
	t.Helper()
	cl := c.client()
	cl.Timeout = 0
	resp, err := cl.Get("http://bridged" + ipc.ChannelInput)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("input stream: %s", resp.Status)
	}
	s := &stream{body: resp.Body, items: make(chan ipc.ChannelItem, 16)}
	go func() {
		defer close(s.items)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var it ipc.ChannelItem
			if json.Unmarshal(sc.Bytes(), &it) == nil {
				s.items <- it
			}
		}
	}()
	t.Cleanup(func() { s.body.Close() })
	return s
}

func (s *stream) next(t *testing.T) ipc.ChannelItem {
	t.Helper()
	select {
	case it, ok := <-s.items:
		if !ok {
			t.Fatal("the input stream ended")
		}
		return it
	case <-time.After(5 * time.Second): // well under the stream's heartbeat: the write wakes it
		t.Fatal("no input within 5s")
	}
	return ipc.ChannelItem{}
}

// The host's follow-up input reaches the run's stream as it is written,
// with no wait on a timer; what is not acknowledged is sent again by the
// next stream (a dropped connection), what is acknowledged is not, and the
// close comes last.
func TestChannelInputStreamsAndIsAcknowledged(t *testing.T) {
	c := newChanEnv(t)
	family, _ := c.open(t, "family")
	s := family.stream(t)
	name, err := c.h.home.WriteInput("family", "first follow-up")
	if err != nil {
		t.Fatal(err)
	}
	if it := s.next(t); it.Name != name || it.Text != "first follow-up" {
		t.Fatalf("streamed %+v; want %s", it, name)
	}
	second, err := c.h.home.WriteInput("family", "second follow-up")
	if err != nil {
		t.Fatal(err)
	}
	if it := s.next(t); it.Name != second {
		t.Fatalf("streamed %+v; want %s", it, second)
	}
	ack, _ := json.Marshal(ipc.ChannelItem{Name: name})
	if status, data, err := family.post(t, ipc.ChannelAck, ack); err != nil || status != http.StatusNoContent {
		t.Fatalf("ack: %d %s %v", status, data, err)
	}
	// The connection drops; the next stream sends what was not acknowledged.
	s.body.Close()
	s = family.stream(t)
	if it := s.next(t); it.Name != second || it.Text != "second follow-up" {
		t.Fatalf("the new stream sent %+v; want only the unacknowledged %s", it, second)
	}
	if err := c.h.home.WriteClose("family"); err != nil {
		t.Fatal(err)
	}
	if it := s.next(t); it.Name != ipc.CloseName {
		t.Fatalf("streamed %+v; want the close", it)
	}
	for _, n := range []string{second, ipc.CloseName} {
		b, _ := json.Marshal(ipc.ChannelItem{Name: n})
		if status, _, err := family.post(t, ipc.ChannelAck, b); err != nil || status != http.StatusNoContent {
			t.Fatalf("ack %s: %d %v", n, status, err)
		}
	}
	in, err := c.h.home.Input("family")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if names, _, _ := in.List(10); len(names) != 0 {
		t.Errorf("input left after every item was acknowledged: %v", names)
	}
	for _, bad := range []string{`{"name":"../requests/x.json"}`, `{"name":""}`, `nope`} {
		if status, _, err := family.post(t, ipc.ChannelAck, []byte(bad)); err != nil || status != http.StatusBadRequest {
			t.Errorf("ack %s: %d %v; want 400", bad, status, err)
		}
	}
}

// A stream is the run's own: another group's input never reaches it.
func TestChannelInputIsTheTokensGroupsOnly(t *testing.T) {
	c := newChanEnv(t)
	family, _ := c.open(t, "family")
	s := family.stream(t)
	if _, err := c.h.home.WriteInput("main", "for main only"); err != nil {
		t.Fatal(err)
	}
	mine, err := c.h.home.WriteInput("family", "for family")
	if err != nil {
		t.Fatal(err)
	}
	if it := s.next(t); it.Name != mine {
		t.Fatalf("family's stream sent %+v; want only family's input", it)
	}
}

// An approval the owner is asked about outlives the connection that asked:
// the runner's sending again, after a drop, gets the owner's decision (the
// announcement it claimed is taken once), and the group's other requests
// are answered while the owner thinks.
func TestChannelApprovalSurvivesADroppedConnection(t *testing.T) {
	c := newChanEnv(t)
	setTools(t, c.db, "family", store.ToolsAsk)
	ap := &approver{asked: make(chan ipc.AskApprovalArgs, 2), release: make(chan ipc.ApprovalDecision, 1)}
	ap.announce("toolu_1", "Bash")
	c.h.cfg.Approver = ap
	family, _ := c.open(t, "family")
	req := ipc.NewRequest(ipc.AskApprovalArgs{Tool: "Bash", ToolUseID: "toolu_1", Input: json.RawMessage(`{"command":"ls"}`)})
	body, _ := json.Marshal(req)

	conn, err := family.dial()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: bridged\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", ipc.ChannelRequest, len(body), body)
	select {
	case <-ap.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the owner was not asked within 10s")
	}
	conn.Close()
	if status, resp := family.call(t, ipc.NewRequest(ipc.ListTasksArgs{})); status != http.StatusOK || !resp.OK {
		t.Errorf("list_tasks while the owner is asked: %d %+v", status, resp)
	}
	again := make(chan ipc.Response, 1)
	go func() {
		_, resp := family.call(t, req)
		again <- resp
	}()
	ap.release <- ipc.ApprovalDecision{Allow: true}
	resp := <-again
	if d := decodeData[ipc.ApprovalDecision](t, resp); !resp.OK || !d.Allow {
		t.Fatalf("sent again: %+v; want the owner's allow", resp)
	}
	select {
	case <-ap.asked:
		t.Error("the owner was asked twice")
	default:
	}
}

package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
)

// waitDir waits, on file system events, until cond holds for dir or the
// deadline passes.
func waitDir(t *testing.T, deadline time.Duration, dir, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	if err := ipctest.WaitFor(ctx, dir, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", deadline, what, err)
	}
}

func testConfig(t *testing.T, isMain bool) Config {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		IPCDir:   t.TempDir(),
		Group:    "family",
		Chat:     "120363000000000001@g.us",
		IsMain:   isMain,
		Timezone: loc,
		Timeout:  5 * time.Second,
	}
}

// startServer runs the server over pipes and connects an SDK client to it.
func startServer(t *testing.T, cfg Config) *mcp.ClientSession {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, c2sR, s2cW) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		c2sW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v; want nil at end of input", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return after its input closed")
		}
		cancel()
	})
	return cs
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

func callAsync(cs *mcp.ClientSession, name string, args any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		ch <- callResult{res, err}
	}()
	return ch
}

func resultText(t *testing.T, r callResult) (string, bool) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("CallTool: %v", r.err)
	}
	var parts []string
	for _, c := range r.res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), r.res.IsError
}

func await(t *testing.T, ch <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("tool call did not return")
		return callResult{}
	}
}

// nextRequest waits for the single request file and returns its name and
// raw content.
func nextRequest(t *testing.T, l ipc.Layout) (string, []byte) {
	t.Helper()
	var names []string
	waitDir(t, 5*time.Second, l.Requests(), "a request file", func() bool {
		names, _ = ipc.List(l.Requests())
		return len(names) > 0
	})
	if len(names) != 1 {
		t.Fatalf("got %d request files %v; want 1", len(names), names)
	}
	data, err := os.ReadFile(filepath.Join(l.Requests(), names[0]))
	if err != nil {
		t.Fatal(err)
	}
	return names[0], data
}

func respond(t *testing.T, l ipc.Layout, resp ipc.Response) {
	t.Helper()
	if err := ipc.WriteJSON(l.Responses(), resp.ID+".json", resp); err != nil {
		t.Fatal(err)
	}
}

func noRequests(t *testing.T, l ipc.Layout) {
	t.Helper()
	names, err := ipc.List(l.Requests())
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Errorf("got request files %v; want none", names)
	}
}

func TestSendMessageWritesRequestAndReturnsAnswer(t *testing.T) {
	cfg := testConfig(t, false)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "send_message", map[string]any{"text": "working on it"})
	name, data := nextRequest(t, l)

	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("request is not JSON: %v", err)
	}
	id := strings.TrimSuffix(name, ".json")
	if raw["id"] != id || raw["type"] != "send_message" {
		t.Errorf("got id %v type %v; want id %q (the file name) type send_message", raw["id"], raw["type"], id)
	}
	args, _ := json.Marshal(raw["args"])
	if string(args) != `{"text":"working on it"}` {
		t.Errorf("got args %s; want {\"text\":\"working on it\"}", args)
	}
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatalf("host cannot decode the request: %v", err)
	}

	ok, _ := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 7, Chat: cfg.Chat})
	respond(t, l, ok)
	text, isErr := resultText(t, await(t, ch))
	if isErr || text != "Message queued for delivery to this chat." {
		t.Errorf("got %q (error %v); want the delivery confirmation", text, isErr)
	}
	waitDir(t, 5*time.Second, l.Responses(), "the response file to be deleted", func() bool {
		names, _ := ipc.List(l.Responses())
		return len(names) == 0
	})
}

func TestHostErrorIsToldToTheAgent(t *testing.T) {
	cfg := testConfig(t, false)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "cancel_task", map[string]any{"task_id": "t-42"})
	_, data := nextRequest(t, l)
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	if req.Type != ipc.TypeCancelTask {
		t.Errorf("got type %s; want cancel_task", req.Type)
	}
	respond(t, l, ipc.Response{ID: req.ID, Error: "task t-42 belongs to another group"})
	text, isErr := resultText(t, await(t, ch))
	if !isErr || text != "task t-42 belongs to another group" {
		t.Errorf("got %q (error %v); want the host's error text as an error result", text, isErr)
	}
}

func TestUnansweredRequestTimesOut(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.Timeout = 200 * time.Millisecond
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	start := time.Now()
	text, isErr := resultText(t, await(t, callAsync(cs, "send_message", map[string]any{"text": "hello"})))
	if !isErr || !strings.Contains(text, "did not answer within 200ms") || !strings.Contains(text, "may still be processed") {
		t.Errorf("got %q (error %v); want a timeout error naming 200ms", text, isErr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %s; want about 200ms", d)
	}
	noRequests(t, l) // the unanswered request was withdrawn
}

func TestLateResponseIsDiscarded(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.Timeout = 200 * time.Millisecond
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "send_message", map[string]any{"text": "hello"})
	name, _ := nextRequest(t, l)
	if _, isErr := resultText(t, await(t, ch)); !isErr {
		t.Fatal("got success; want a timeout")
	}
	id := strings.TrimSuffix(name, ".json")
	ok, _ := ipc.OKResponse(id, nil)
	respond(t, l, ok)
	waitDir(t, 5*time.Second, l.Responses(), "the late response to be deleted", func() bool {
		names, _ := ipc.List(l.Responses())
		return len(names) == 0
	})
}

func TestRefusedBeforeAnythingIsWritten(t *testing.T) {
	tests := []struct {
		name   string
		isMain bool
		tool   string
		args   map[string]any
		want   string
	}{
		{"register_group from non-main", false, "register_group",
			map[string]any{"chat": "123@g.us", "name": "Work", "folder": "work"}, "only the main group can register groups"},
		{"list_groups from non-main", false, "list_groups", map[string]any{}, "only the main group can list groups"},
		{"target_chat from non-main", false, "send_message",
			map[string]any{"text": "hi", "target_chat": "999@g.us"}, "only the main group can send to another chat"},
		{"target_group from non-main", false, "schedule_task",
			map[string]any{"prompt": "p", "schedule_type": "interval", "schedule_value": "1h", "context_mode": "group", "target_group": "work"},
			"only the main group can manage another group's tasks"},
		{"invalid cron", false, "schedule_task",
			map[string]any{"prompt": "p", "schedule_type": "cron", "schedule_value": "61 * * * *", "context_mode": "isolated"},
			`invalid cron expression "61 * * * *": `},
		{"invalid cron in update", true, "update_task",
			map[string]any{"task_id": "t1", "schedule_type": "cron", "schedule_value": "* * *"},
			`invalid cron expression "* * *": `},
		{"interval too short", false, "schedule_task",
			map[string]any{"prompt": "p", "schedule_type": "interval", "schedule_value": "10s", "context_mode": "group"},
			`invalid interval "10s": must be at least 1m0s`},
		{"once in the past", false, "schedule_task",
			map[string]any{"prompt": "p", "schedule_type": "once", "schedule_value": "2001-01-01 10:00", "context_mode": "group"},
			"it is in the past"},
		{"bad context mode", false, "schedule_task",
			map[string]any{"prompt": "p", "schedule_type": "interval", "schedule_value": "1h", "context_mode": "shared"},
			"context_mode"},
		{"empty text", false, "send_message", map[string]any{"text": "  "}, "text is empty"},
		{"update without changes", false, "update_task", map[string]any{"task_id": "t1"}, "nothing to update"},
		{"unknown argument field", false, "send_message",
			map[string]any{"text": "hi", "chat": "999@g.us"}, `unexpected additional properties ["chat"]`},
		{"missing required field", false, "schedule_task",
			map[string]any{"prompt": "p", "schedule_type": "interval", "schedule_value": "1h"}, `missing properties: ["context_mode"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.isMain)
			l := ipc.Layout{Root: cfg.IPCDir}
			cs := startServer(t, cfg)
			r := await(t, callAsync(cs, tc.tool, tc.args))
			var text string
			if r.err != nil {
				text = r.err.Error() // a protocol-level refusal is a refusal too
			} else {
				var isErr bool
				text, isErr = resultText(t, r)
				if !isErr {
					t.Errorf("got success %q; want an error result", text)
				}
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("got %q; want it to contain %q", text, tc.want)
			}
			noRequests(t, l)
		})
	}
}

func TestScheduleTaskReportsIDAndNextRun(t *testing.T) {
	cfg := testConfig(t, true)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "schedule_task", map[string]any{
		"prompt": "water the plants", "schedule_type": "cron", "schedule_value": "0 9 * * 1-5",
		"context_mode": "isolated", "target_group": "work",
	})
	_, data := nextRequest(t, l)
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	args, ok := req.Args.(ipc.ScheduleTaskArgs)
	if !ok || args.TargetGroup != "work" || args.ContextMode != ipc.ContextIsolated || args.ScheduleValue != "0 9 * * 1-5" {
		t.Errorf("got args %+v; want the main group's target_group, isolated, the cron value", req.Args)
	}
	resp, _ := ipc.OKResponse(req.ID, ipc.TaskInfo{ID: "task-17", Group: "work", ScheduleType: "cron",
		ScheduleValue: "0 9 * * 1-5", ContextMode: ipc.ContextIsolated, Status: "active", NextRun: "2026-11-23T09:00:00+01:00"})
	respond(t, l, resp)
	text, isErr := resultText(t, await(t, ch))
	if isErr || !strings.Contains(text, "task-17") || !strings.Contains(text, "2026-11-23T09:00:00+01:00") || !strings.Contains(text, "Europe/Berlin") {
		t.Errorf("got %q (error %v); want the task id, next run and timezone", text, isErr)
	}
}

func TestListTasksFormatsEveryTask(t *testing.T) {
	cfg := testConfig(t, false)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "list_tasks", map[string]any{})
	_, data := nextRequest(t, l)
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := ipc.OKResponse(req.ID, []ipc.TaskInfo{
		{ID: "a1", Prompt: "first", ScheduleType: "interval", ScheduleValue: "1h", Status: "active", NextRun: "2026-11-22T10:00:00+01:00"},
		{ID: "b2", Prompt: "second", ScheduleType: "once", ScheduleValue: "2026-12-01 08:00", Status: "paused"},
	})
	respond(t, l, resp)
	text, isErr := resultText(t, await(t, ch))
	if isErr || !strings.Contains(text, "[a1]") || !strings.Contains(text, "[b2]") || !strings.Contains(text, "paused") {
		t.Errorf("got %q (error %v); want both tasks listed", text, isErr)
	}
}

func TestMainGroupMayTargetAnotherChat(t *testing.T) {
	cfg := testConfig(t, true)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "send_message", map[string]any{"text": "hi", "target_chat": "999@g.us"})
	_, data := nextRequest(t, l)
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	if a := req.Args.(ipc.SendMessageArgs); a.TargetChat != "999@g.us" {
		t.Errorf("got target_chat %q; want 999@g.us", a.TargetChat)
	}
	resp, _ := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 1, Chat: "999@g.us"})
	respond(t, l, resp)
	if text, isErr := resultText(t, await(t, ch)); isErr || !strings.Contains(text, "999@g.us") {
		t.Errorf("got %q (error %v); want delivery to 999@g.us", text, isErr)
	}
}

// TestServerDiscoverProbeBeforeInitialize replays the handshake Claude Code
// sent in fixture 04: a server/discover probe first, then initialize.
func TestServerDiscoverProbeBeforeInitialize(t *testing.T) {
	cfg := testConfig(t, false)
	l := ipc.Layout{Root: cfg.IPCDir}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer outW.Close() // ends the reader below
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, inR, outW) }()

	lines := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("server wrote a non-JSON line %q", sc.Text())
				continue
			}
			lines <- m
		}
		close(lines)
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	reply := func(id any) map[string]any {
		t.Helper()
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("server closed its output waiting for reply %v", id)
				}
				if m["id"] == id {
					return m
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no reply to %v", id)
			}
		}
	}

	send(`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.330"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}}`)
	// Answered with an error, as the recorded server did: answering it made the
	// SDK refuse the initialize that Claude Code sends next.
	if probe := reply("server-discover-probe-1"); probe["error"] == nil {
		t.Errorf("got probe reply %v; want an error", probe)
	}
	send(`{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.330"}},"jsonrpc":"2.0","id":0}`)
	init := reply(float64(0))
	res, _ := init["result"].(map[string]any)
	info, _ := res["serverInfo"].(map[string]any)
	if info["name"] != "bridge" {
		t.Fatalf("got initialize reply %v; want serverInfo.name bridge", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"method":"tools/list","jsonrpc":"2.0","id":1}`)
	list := reply(float64(1))
	tools, _ := list["result"].(map[string]any)["tools"].([]any)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	want := "send_message schedule_task list_tasks update_task pause_task resume_task cancel_task register_group list_groups"
	for _, n := range strings.Fields(want) {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") {
			t.Errorf("tools/list lacks %s; got %v", n, names)
		}
	}
	send(`{"method":"tools/call","params":{"name":"send_message","arguments":{"text":"hello from tool"},"_meta":{"claudecode/toolUseId":"toolu_1","progressToken":2}},"jsonrpc":"2.0","id":2}`)
	_, data := nextRequest(t, l)
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 1, Chat: cfg.Chat})
	respond(t, l, ok)
	call := reply(float64(2))
	if r, _ := call["result"].(map[string]any); r == nil || r["isError"] == true {
		t.Errorf("got tools/call reply %v; want a successful result", call)
	}

	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v; want nil at EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return at EOF")
	}
}

func TestConfigFromEnv(t *testing.T) {
	base := map[string]string{
		EnvIPCDir: "/workspace/ipc", EnvGroup: "family", EnvChat: "1@g.us",
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{"defaults", nil, "", func(t *testing.T, c Config) {
			if c.IsMain || c.Timezone.String() != "UTC" || c.Timeout != 30*time.Second {
				t.Errorf("got main %v tz %s timeout %s; want false UTC 30s", c.IsMain, c.Timezone, c.Timeout)
			}
		}},
		{"all set", map[string]string{EnvIsMain: "1", EnvTimezone: "America/New_York", EnvTimeout: "5s"}, "", func(t *testing.T, c Config) {
			if !c.IsMain || c.Timezone.String() != "America/New_York" || c.Timeout != 5*time.Second || c.Group != "family" || c.Chat != "1@g.us" {
				t.Errorf("got %+v; want main, New York, 5s", c)
			}
		}},
		{"missing dir", map[string]string{EnvIPCDir: ""}, EnvIPCDir, nil},
		{"missing group", map[string]string{EnvGroup: ""}, EnvGroup, nil},
		{"missing chat", map[string]string{EnvChat: ""}, EnvChat, nil},
		{"bad is_main", map[string]string{EnvIsMain: "yes"}, EnvIsMain, nil},
		{"bad timezone", map[string]string{EnvTimezone: "Mars/Olympus"}, EnvTimezone, nil},
		{"bad timeout", map[string]string{EnvTimeout: "soon"}, EnvTimeout, nil},
		{"negative timeout", map[string]string{EnvTimeout: "-1s"}, EnvTimeout, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := ConfigFromEnv(func(k string) string { return env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got error %v; want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v; want none", err)
			}
			tc.check(t, c)
		})
	}
}

func TestUpdateTaskSendsOnlyWhatChanges(t *testing.T) {
	cfg := testConfig(t, false)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "update_task", map[string]any{"task_id": "t1", "schedule_type": "cron", "schedule_value": "30 8 * * *"})
	_, data := nextRequest(t, l)
	var raw struct {
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"task_id": "t1", "schedule_type": "cron", "schedule_value": "30 8 * * *"}
	if len(raw.Args) != len(want) || raw.Args["task_id"] != "t1" || raw.Args["schedule_type"] != "cron" || raw.Args["schedule_value"] != "30 8 * * *" {
		t.Errorf("got args %v; want %v", raw.Args, want)
	}
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := ipc.OKResponse(req.ID, ipc.TaskInfo{ID: "t1", ScheduleType: "cron", ScheduleValue: "30 8 * * *", Status: "active", NextRun: "2026-11-23T08:30:00+01:00"})
	respond(t, l, resp)
	if text, isErr := resultText(t, await(t, ch)); isErr || !strings.Contains(text, "2026-11-23T08:30:00+01:00") {
		t.Errorf("got %q (error %v); want the updated task with its next run", text, isErr)
	}
}

func TestSendMessageWithFile(t *testing.T) {
	cfg := testConfig(t, false)
	l := ipc.Layout{Root: cfg.IPCDir}
	cs := startServer(t, cfg)

	ch := callAsync(cs, "send_message", map[string]any{"text": "the chart", "file": " out/chart.png "})
	_, data := nextRequest(t, l)
	req, err := ipc.DecodeRequest(data)
	if err != nil {
		t.Fatalf("host cannot decode the request: %v", err)
	}
	if a, _ := req.Args.(ipc.SendMessageArgs); a.File != "out/chart.png" || a.Text != "the chart" {
		t.Errorf("got args %+v; want the caption and file out/chart.png", req.Args)
	}
	ok, _ := ipc.OKResponse(req.ID, ipc.SendResult{OutboxID: 7, Chat: cfg.Chat, File: &ipc.FileInfo{Name: "chart.png", Kind: "image", Size: 3016}})
	respond(t, l, ok)
	text, isErr := resultText(t, await(t, ch))
	if isErr || text != "Message with image chart.png (3016 bytes) queued for delivery to this chat." {
		t.Errorf("got %q (error %v); want the delivery confirmation naming the file", text, isErr)
	}
}

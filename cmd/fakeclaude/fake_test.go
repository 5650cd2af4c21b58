package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/ipc/ipctest"
)

func TestInitializeAndReply(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	p := startFake(t, dir, baseEnv(home))
	p.send(`{"request_id":"a1nqn7aqwh","type":"control_request","request":{"subtype":"initialize","systemPrompt":[""]}}`)
	p.sendUser("hello world")

	resp := p.next()
	r, _ := resp["response"].(map[string]any)
	body, _ := r["response"].(map[string]any)
	if resp["type"] != "control_response" || r["subtype"] != "success" || r["request_id"] != "a1nqn7aqwh" {
		t.Fatalf("got first line %v; want the initialize control_response", resp)
	}
	if body["claude_code_version"] != "2.1.330" || body["pid"] == nil || body["commands"] == nil || body["models"] == nil {
		t.Errorf("got initialize response %v; want version 2.1.330, pid, commands, models", body)
	}

	res, before := p.result()
	if got := kinds(before); strings.Join(got, ",") != "system/init,assistant" {
		t.Errorf("got lines %v before the result; want system/init, assistant", got)
	}
	init := before[0]
	sid, _ := init["session_id"].(string)
	if _, err := uuid.Parse(sid); err != nil || init["cwd"] != dir || init["claude_code_version"] != "2.1.330" {
		t.Errorf("got init session %q cwd %v; want a uuid and cwd %s", sid, init["cwd"], dir)
	}
	if got := assistantText(before[1]); got != "echo: hello world" {
		t.Errorf("got assistant text %q; want %q", got, "echo: hello world")
	}
	if res["subtype"] != "success" || res["is_error"] != false || res["result"] != "echo: hello world" ||
		res["session_id"] != sid || res["terminal_reason"] != "completed" || res["num_turns"] != float64(1) {
		t.Errorf("got result %v; want success, echo: hello world, session %s, completed, 1 turn", res, sid)
	}
	if c, _ := res["total_cost_usd"].(float64); c <= 0 {
		t.Errorf("got total_cost_usd %v; want a small positive cost", res["total_cost_usd"])
	}
	if code, rest := p.wait(); code != 0 || len(rest) != 0 {
		t.Errorf("got exit %d and lines %v after EOF; want 0 and nothing", code, kinds(rest))
	}
}

func TestTwoTurnsShareSessionAndTranscript(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	p := startFake(t, dir, baseEnv(home))
	p.sendUser("first message")
	p.sendUser("fake:reply second answer")
	r1, b1 := p.result()
	r2, b2 := p.result()
	if len(b1) == 0 || len(b2) == 0 || kind(b1[0]) != "system/init" || kind(b2[0]) != "system/init" {
		t.Fatalf("got %v then %v; want a system/init opening each turn", kinds(b1), kinds(b2))
	}
	sid := r1["session_id"].(string)
	if r2["session_id"] != sid || b2[0]["session_id"] != sid {
		t.Errorf("got second turn session %v; want %s", r2["session_id"], sid)
	}
	if r1["result"] != "echo: first message" || r2["result"] != "second answer" {
		t.Errorf("got results %q, %q; want the echo and the scripted reply", r1["result"], r2["result"])
	}
	if r1["result_index"] != float64(0) || r2["result_index"] != float64(1) {
		t.Errorf("got result_index %v, %v; want 0, 1", r1["result_index"], r2["result_index"])
	}
	if c1, c2 := r1["total_cost_usd"].(float64), r2["total_cost_usd"].(float64); c2 <= c1 {
		t.Errorf("got total cost %v then %v; want a running total", c1, c2)
	}
	if code, _ := p.wait(); code != 0 {
		t.Errorf("got exit %d; want 0", code)
	}

	path := filepath.Join(home, ".claude", "projects", slug(dir), sid+".jsonl")
	entries := readTranscript(t, path)
	var types []string
	prev := any(nil)
	for _, e := range entries {
		types = append(types, e["type"].(string))
		if e["parentUuid"] != prev {
			t.Errorf("entry %v has parentUuid %v; want %v (the previous entry)", e["uuid"], e["parentUuid"], prev)
		}
		prev = e["uuid"]
	}
	if strings.Join(types, ",") != "user,assistant,user,assistant" {
		t.Errorf("got transcript %v; want user,assistant twice", types)
	}
}

func TestResumeFromAnotherCwd(t *testing.T) {
	home, dirA, dirB := t.TempDir(), t.TempDir(), t.TempDir()
	p := startFake(t, dirA, baseEnv(home))
	p.sendUser("fake:reply made in A")
	r, _ := p.result()
	sid := r["session_id"].(string)
	p.wait()
	pathA := filepath.Join(home, ".claude", "projects", slug(dirA), sid+".jsonl")
	lastA := readTranscript(t, pathA)
	last := lastA[len(lastA)-1]["uuid"]

	p = startFake(t, dirB, baseEnv(home), "--resume="+sid)
	p.sendUser("fake:pid")
	r, before := p.result()
	if before[0]["session_id"] != sid || r["session_id"] != sid || before[0]["cwd"] != dirB {
		t.Errorf("got init session %v cwd %v; want the resumed %s in %s", before[0]["session_id"], before[0]["cwd"], sid, dirB)
	}
	if want := fmt.Sprintf("session=%s", sid); !strings.Contains(r["result"].(string), want) {
		t.Errorf("got %q; want it to name %s", r["result"], want)
	}
	if code, _ := p.wait(); code != 0 {
		t.Errorf("got exit %d; want 0", code)
	}
	entries := readTranscript(t, pathA)
	if len(entries) != len(lastA)+2 {
		t.Fatalf("got %d transcript entries; want %d (the resumed turn appended in A's folder)", len(entries), len(lastA)+2)
	}
	added := entries[len(lastA)]
	if added["parentUuid"] != last || added["cwd"] != dirB {
		t.Errorf("got new entry parent %v cwd %v; want %v and %s", added["parentUuid"], added["cwd"], last, dirB)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude", "projects", slug(dirB), sid+".jsonl")); err == nil {
		t.Errorf("a transcript appeared in B's folder; want it to stay in A's")
	}
}

func TestResumeSessionAtBranches(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	p := startFake(t, dir, baseEnv(home))
	p.sendUser("one")
	_, b1 := p.result()
	p.sendUser("two")
	r, _ := p.result()
	p.wait()
	sid := r["session_id"].(string)
	firstAssistant := b1[1]["uuid"].(string)

	p = startFake(t, dir, baseEnv(home), "--resume="+sid, "--resume-session-at="+firstAssistant)
	p.sendUser("three")
	p.result()
	p.wait()
	entries := readTranscript(t, filepath.Join(home, ".claude", "projects", slug(dir), sid+".jsonl"))
	if got := entries[4]["parentUuid"]; got != firstAssistant {
		t.Errorf("got parent %v for the new prompt; want the first answer %s", got, firstAssistant)
	}

	p = startFake(t, dir, baseEnv(home), "--resume="+sid, "--resume-session-at="+uuid.NewString())
	if code, rest := p.wait(); code != 1 || len(rest) != 0 {
		t.Errorf("got exit %d, lines %v for an unknown message uuid; want 1 and nothing", code, kinds(rest))
	}
}

func TestUnknownResumeFailsAtStartup(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	id := uuid.NewString()
	p := startFake(t, dir, baseEnv(home), "--resume="+id)
	p.sendUser("hello to a session that does not exist")
	// Stdin stays open: the fake must exit by itself.
	res := p.next()
	if res == nil {
		t.Fatalf("got no output; want one result line; stderr: %s", p.stderr.String())
	}
	want := "No conversation found with session ID: " + id
	errs, _ := res["errors"].([]any)
	if kind(res) != "result/error_during_execution" || res["is_error"] != true || res["session_id"] != id ||
		len(errs) != 1 || errs[0] != want || res["num_turns"] != float64(0) {
		t.Errorf("got %v; want fixture 18's error_during_execution result", res)
	}
	if _, ok := res["result"]; ok {
		t.Errorf("got a result field; fixture 18 has none")
	}
	if m := p.next(); m != nil {
		t.Errorf("got a second line %v; want exactly one", m)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("fake did not exit by itself")
	}
	if p.code != 1 || strings.TrimSpace(p.stderr.String()) != want {
		t.Errorf("got exit %d stderr %q; want 1 and %q", p.code, p.stderr.String(), want)
	}
}

func TestCrashExitsTwoMidTurn(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.sendUser("fake:reply partial\nfake:crash\nfake:reply never")
	var got []map[string]any
	for m := p.next(); m != nil; m = p.next() {
		got = append(got, m)
	}
	<-p.exited
	if p.code != 2 || strings.Join(kinds(got), ",") != "system/init,assistant" {
		t.Errorf("got exit %d and %v; want 2 after system/init and assistant, no result", p.code, kinds(got))
	}
}

func TestNonJSONLineIsFatal(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.send("this is not json")
	if m := p.next(); m != nil {
		t.Errorf("got stdout %v; want nothing", m)
	}
	<-p.exited
	want := "Error parsing streaming input line (type=unknown, 16 chars): SyntaxError"
	if p.code != 1 || strings.TrimSpace(p.stderr.String()) != want {
		t.Errorf("got exit %d stderr %q; want 1 and %q", p.code, p.stderr.String(), want)
	}
}

func TestUnknownTypesIgnoredAndControlRequests(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.send(`{"type":"bogus_type","x":1}`)
	p.send(`{"type":"keep_alive"}`)
	p.send(`{"type":"control_request","request_id":"perm-1","request":{"subtype":"set_permission_mode","mode":"acceptEdits"}}`)
	p.send(`{"type":"control_request","request_id":"model-1","request":{"subtype":"set_model","model":"claude-haiku-4-5"}}`)
	p.send(`{"type":"control_request","request_id":"interrupt-idle","request":{"subtype":"interrupt"}}`)
	p.send(`{"type":"control_request","request_id":"bogus-1","request":{"subtype":"no_such_subtype"}}`)
	p.sendUser("still alive?")
	res, before := p.result()
	byID := map[string]map[string]any{}
	for _, m := range before {
		if r, ok := m["response"].(map[string]any); ok {
			byID[r["request_id"].(string)] = r
		}
	}
	if r := byID["bogus-1"]; r == nil || r["subtype"] != "error" || r["error_code"] != "unsupported_request" ||
		r["error"] != "Unsupported control request subtype: no_such_subtype" {
		t.Errorf("got %v for an unknown subtype; want the unsupported_request error envelope", r)
	}
	if r := byID["interrupt-idle"]; r == nil || r["subtype"] != "success" {
		t.Errorf("got %v for an idle interrupt; want success", r)
	}
	if r := byID["perm-1"]; r == nil || r["response"].(map[string]any)["mode"] != "acceptEdits" {
		t.Errorf("got %v for set_permission_mode; want mode acceptEdits", r)
	}
	init, _ := p.findInit(before)
	if init["model"] != "claude-haiku-4-5" || init["permissionMode"] != "acceptEdits" {
		t.Errorf("got init model %v mode %v; want the values just set", init["model"], init["permissionMode"])
	}
	if res["result"] != "echo: still alive?" {
		t.Errorf("got %q; want the process to keep serving", res["result"])
	}
}

func (p *proc) findInit(lines []map[string]any) (map[string]any, bool) {
	for _, m := range lines {
		if kind(m) == "system/init" {
			return m, true
		}
	}
	p.t.Fatalf("no system/init in %v", kinds(lines))
	return nil, false
}

func TestErrorDirectiveIsAnAPIError(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.sendUser("fake:error API Error: Repeated 529 Overloaded errors")
	res, before := p.result()
	if res["subtype"] != "success" || res["is_error"] != true || res["terminal_reason"] != "api_error" ||
		res["result"] != "API Error: Repeated 529 Overloaded errors" {
		t.Errorf("got %v; want fixture 08's error result", res)
	}
	if a := before[len(before)-1]; a["is_api_error_message"] != true {
		t.Errorf("got %v before the result; want the synthetic API-error assistant line", kind(a))
	}
	if code, _ := p.wait(); code != 1 {
		t.Errorf("got exit %d; want 1 after an error result", code)
	}
}

func TestFollowUpDuringTurnGetsItsOwnTurn(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.sendUser("fake:sleep 300ms\nfake:reply slow first")
	p.sendUser("second message")
	r1, _ := p.result()
	r2, b2 := p.result()
	if r1["result"] != "slow first" || r2["result"] != "echo: second message" {
		t.Errorf("got %q then %q; want each message answered by its own result, in order", r1["result"], r2["result"])
	}
	if len(b2) == 0 || kind(b2[0]) != "system/init" {
		t.Errorf("got %v before the second result; want a turn of its own", kinds(b2))
	}
}

func TestInterruptStopsTheTurn(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.sendUser("fake:sleep 30s\nfake:reply too late")
	p.until("system/init", func(m map[string]any) bool { return kind(m) == "system/init" })
	start := time.Now()
	p.send(`{"request_id":"int-1","type":"control_request","request":{"subtype":"interrupt"}}`)
	res, before := p.result()
	if time.Since(start) > 10*time.Second {
		t.Errorf("interrupt took %s; want it to cut the sleep short", time.Since(start))
	}
	if got := kinds(before); strings.Join(got, ",") != "control_response,user" {
		t.Errorf("got %v before the result; want control_response, user (fixture 09)", got)
	}
	if res["subtype"] != "error_during_execution" || res["is_error"] != true || res["terminal_reason"] != "aborted_streaming" {
		t.Errorf("got %v; want error_during_execution, aborted_streaming", res)
	}
	p.sendUser("after interrupt")
	if r, _ := p.result(); r["result"] != "echo: after interrupt" {
		t.Errorf("got %q; want the next message answered", r["result"])
	}
}

func TestStdinEOFFinishesTheTurnInFlight(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.sendUser("fake:sleep 200ms\nfake:reply finished")
	code, rest := p.wait()
	var res map[string]any
	for _, m := range rest {
		if m["type"] == "result" {
			res = m
		}
	}
	if code != 0 || res == nil || res["result"] != "finished" {
		t.Errorf("got exit %d, result %v; want the turn finished, then exit 0", code, res)
	}
}

func TestBashRunsWhatTheHookReturns(t *testing.T) {
	for _, shell := range []string{"sh", "builtin"} {
		t.Run(shell, func(t *testing.T) {
			env := baseEnv(t.TempDir(), "SECRET_A=aaa", "SECRET_B=bbb", "KEEP_ME=1")
			if shell == "builtin" {
				env = append(env, "FAKECLAUDE_NO_SHELL=1")
			}
			p := startFake(t, t.TempDir(), env)
			p.send(`{"request_id":"i1","type":"control_request","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_1"]}]}}}`)
			p.sendUser("fake:bash env")
			req, _ := p.until("the hook callback", isType("control_request"))
			body := req["request"].(map[string]any)
			input := body["input"].(map[string]any)
			if body["subtype"] != "hook_callback" || body["callback_id"] != "hook_1" || input["hook_event_name"] != "PreToolUse" ||
				input["tool_input"].(map[string]any)["command"] != "env" {
				t.Fatalf("got %v; want a PreToolUse hook_callback for hook_1 with command env", body)
			}
			resp, _ := json.Marshal(map[string]any{"type": "control_response", "response": map[string]any{
				"subtype": "success", "request_id": req["request_id"], "response": map[string]any{
					"hookSpecificOutput": map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "allow",
						"updatedInput": map[string]any{"command": "unset SECRET_A SECRET_B; env"}}}}})
			p.send(string(resp))
			res, _ := p.result()
			out, _ := res["result"].(string)
			if strings.Contains(out, "SECRET_") || !strings.Contains(out, "KEEP_ME=1") {
				t.Errorf("got output %q; want the rewritten command's env without SECRET_*", out)
			}
		})
	}
}

func TestBashDeniedByHook(t *testing.T) {
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir()))
	p.send(`{"request_id":"i1","type":"control_request","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_1"]}]}}}`)
	p.sendUser("fake:bash echo should-not-run")
	req, _ := p.until("the hook callback", isType("control_request"))
	p.send(fmt.Sprintf(`{"type":"control_response","response":{"subtype":"error","request_id":%q,"error":"hook crashed"}}`, req["request_id"]))
	res, _ := p.result()
	if out := res["result"].(string); !strings.HasPrefix(out, "tool error: ") || strings.Contains(out, "should-not-run") {
		t.Errorf("got %q; want a tool error and the command not run", out)
	}
}

func TestCompactFiresPreCompact(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	p := startFake(t, dir, baseEnv(home))
	p.send(`{"request_id":"i1","type":"control_request","request":{"subtype":"initialize","hooks":{"PreCompact":[{"hookCallbackIds":["hook_0"]}]}}}`)
	p.sendUser("hello")
	first, _ := p.result()
	p.sendUser("fake:compact")
	req, _ := p.until("the hook callback", isType("control_request"))
	input := req["request"].(map[string]any)["input"].(map[string]any)
	path, _ := input["transcript_path"].(string)
	wantPath := filepath.Join(home, ".claude", "projects", slug(dir), first["session_id"].(string)+".jsonl")
	if input["hook_event_name"] != "PreCompact" || input["trigger"] != "manual" || path != wantPath {
		t.Errorf("got hook input %v; want PreCompact, manual, transcript %s", input, wantPath)
	}
	if entries := readTranscript(t, path); len(entries) < 2 {
		t.Errorf("got %d transcript entries at hook time; want the conversation so far", len(entries))
	}
	p.send(fmt.Sprintf(`{"type":"control_response","response":{"subtype":"success","request_id":%q,"response":{"continue":true}}}`, req["request_id"]))
	res, before := p.result()
	if res["local_command"] != "compact" || res["result"] != "" || res["num_turns"] != float64(0) || res["is_error"] != false {
		t.Errorf("got %v; want fixture 05's compact result", res)
	}
	if got := strings.Join(kinds(before), ","); got != "system/status,system/init,system/compact_boundary,user,user" {
		t.Errorf("got %s after the hook; want status, init, compact_boundary, user, user", got)
	}
}

func TestToolCallsTheBridgeServer(t *testing.T) {
	home, dir, ipcDir := t.TempDir(), t.TempDir(), t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bridge": map[string]any{
		"command": os.Args[0],
		"env": map[string]string{roleEnv: "mcp", "BRIDGED_MCP_IPC_DIR": ipcDir, "BRIDGED_MCP_GROUP": "family",
			"BRIDGED_MCP_CHAT": "1@g.us", "BRIDGED_MCP_IS_MAIN": "0", "BRIDGED_MCP_TIMEOUT": "10s"},
	}}})
	p := startFake(t, dir, baseEnv(home, "IS_SANDBOX=1"), "--mcp-config", string(cfg),
		"--permission-mode=bypassPermissions", "--allow-dangerously-skip-permissions", "--allowedTools=Bash,mcp__bridge__*")
	p.sendUser(`fake:tool send_message {"text":"hello from tool"}` + "\n" + `fake:tool mcp__bridge__cancel_task {"task_id":"t9"}`)

	l := ipc.Layout{Root: ipcDir}
	answer := func(want ipc.RequestType, resp func(id string) ipc.Response) {
		t.Helper()
		var names []string
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		if err := ipctest.WaitFor(ctx, l.Requests(), func() bool {
			names, _ = ipc.List(l.Requests())
			return len(names) > 0
		}); err != nil {
			t.Fatalf("no %s request appeared (%v); stderr: %s", want, err, p.stderr.String())
		}
		data, err := os.ReadFile(filepath.Join(l.Requests(), names[0]))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(l.Requests(), names[0]))
		req, err := ipc.DecodeRequest(data)
		if err != nil || req.Type != want {
			t.Fatalf("got request %s (%v); want %s", data, err, want)
		}
		r := resp(req.ID)
		if err := ipc.WriteJSON(l.Responses(), r.ID+".json", r); err != nil {
			t.Fatal(err)
		}
	}
	answer(ipc.TypeSendMessage, func(id string) ipc.Response {
		r, _ := ipc.OKResponse(id, ipc.SendResult{OutboxID: 3, Chat: "1@g.us"})
		return r
	})
	answer(ipc.TypeCancelTask, func(id string) ipc.Response { return ipc.Response{ID: id, Error: "no task t9"} })

	res, before := p.result()
	init, _ := p.findInit(before)
	servers, _ := json.Marshal(init["mcp_servers"])
	tools, _ := json.Marshal(init["tools"])
	if !strings.Contains(string(servers), `"status":"connected"`) || !strings.Contains(string(tools), "mcp__bridge__send_message") {
		t.Errorf("got mcp_servers %s, tools %s; want bridge connected with its tools", servers, tools)
	}
	want := "Message queued for delivery to this chat.\ntool error: no task t9"
	if res["result"] != want || res["num_turns"] != float64(3) {
		t.Errorf("got %q in %v turns; want %q in 3", res["result"], res["num_turns"], want)
	}
	if code, _ := p.wait(); code != 0 {
		t.Errorf("got exit %d; want 0", code)
	}
}

func TestStdinLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "stdin.log")
	p := startFake(t, t.TempDir(), baseEnv(t.TempDir(), "FAKECLAUDE_STDIN_LOG="+logPath))
	p.send(`{"request_id":"i1","type":"control_request","request":{"subtype":"initialize"}}`)
	p.sendUser(strings.Repeat("x", 1200))
	p.result()
	p.wait()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines %q; want 2", len(lines), lines)
	}
	f := strings.SplitN(lines[1], " ", 3)
	if len(f) != 3 || f[1] != "user" || f[2] != strings.Repeat("x", 1000) {
		t.Errorf("got %q; want <nanos> user <1000 x>", lines[1])
	}
	var ns int64
	if _, err := fmt.Sscan(f[0], &ns); err != nil || ns < time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() {
		t.Errorf("got timestamp %q; want unix nanoseconds", f[0])
	}
	if !strings.HasPrefix(lines[0], f[0][:3]) || !strings.Contains(lines[0], " control_request initialize") {
		t.Errorf("got %q; want the initialize line logged first", lines[0])
	}
}

func TestStartupRefusals(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     []string
		uid     int
		code    int
		wantErr string
	}{
		{"root with bypass", []string{"--permission-mode=bypassPermissions", "--allow-dangerously-skip-permissions"}, nil, 0, 1,
			"--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"},
		{"root with bypass and IS_SANDBOX", []string{"--permission-mode=bypassPermissions"}, []string{"IS_SANDBOX=1"}, 0, 0, ""},
		{"non-root with bypass", []string{"--permission-mode=bypassPermissions", "--allow-dangerously-skip-permissions"}, nil, 1000, 0, ""},
		{"root without bypass", nil, nil, 0, 0, ""},
		{"unknown flag", []string{"--bogus"}, nil, 1000, 1, "error: unknown option '--bogus'\n"},
		{"unknown flag with value", []string{"--session-id=abc"}, nil, 1000, 1, "error: unknown option '--session-id'\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			args := append(append([]string{}, streamArgs...), tc.args...)
			env := append([]string{"HOME=" + t.TempDir()}, tc.env...)
			code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, env, tc.uid)
			if code != tc.code || stderr.String() != tc.wantErr || stdout.String() != "" {
				t.Errorf("got exit %d stderr %q stdout %q; want %d, %q, nothing", code, stderr.String(), stdout.String(), tc.code, tc.wantErr)
			}
		})
	}
}

func TestAPIDirective(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		var body struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		switch {
		case r.URL.Path != "/v1/messages" || r.URL.RawQuery != "beta=true":
			w.WriteHeader(404)
		case r.Header.Get("X-Api-Key") == "bad":
			w.WriteHeader(401)
			fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		case body.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, d := range []string{`{"type":"message_start","message":{}}`,
				`{"type":"content_block_delta","delta":{"type":"text_delta","text":"str"}}`,
				`{"type":"content_block_delta","delta":{"type":"text_delta","text":"eamed"}}`,
				`{"type":"message_stop"}`} {
				fmt.Fprintf(w, "event: x\ndata: %s\n\n", d)
			}
		default:
			fmt.Fprint(w, `{"content":[{"type":"text","text":"plain answer"}]}`)
		}
	}))
	defer up.Close()

	p := startFake(t, t.TempDir(), baseEnv(t.TempDir(), "ANTHROPIC_BASE_URL="+up.URL, "ANTHROPIC_API_KEY=key-1"))
	p.sendUser("fake:api hello")
	if res, _ := p.result(); res["result"] != "plain answer" || res["is_error"] != false {
		t.Errorf("got %v; want the response text", res)
	}
	p.sendUser("fake:api stream")
	if res, _ := p.result(); res["result"] != "streamed" {
		t.Errorf("got %v; want the text deltas", res["result"])
	}
	mu.Lock()
	if got[0].Get("X-Api-Key") != "key-1" || got[0].Get("Authorization") != "" || got[0].Get("Anthropic-Version") == "" {
		t.Errorf("headers %v", got[0])
	}
	mu.Unlock()

	p2 := startFake(t, t.TempDir(), baseEnv(t.TempDir(), "ANTHROPIC_BASE_URL="+up.URL, "CLAUDE_CODE_OAUTH_TOKEN=tok-1"))
	p2.sendUser("fake:api")
	p2.result()
	mu.Lock()
	if h := got[len(got)-1]; h.Get("Authorization") != "Bearer tok-1" || h.Get("X-Api-Key") != "" {
		t.Errorf("oauth headers %v", h)
	}
	mu.Unlock()

	p3 := startFake(t, t.TempDir(), baseEnv(t.TempDir(), "ANTHROPIC_BASE_URL="+up.URL, "ANTHROPIC_API_KEY=bad"))
	p3.sendUser("fake:api")
	res, _ := p3.result()
	if res["is_error"] != true || res["api_error_status"] != float64(401) || !strings.Contains(res["result"].(string), "401") {
		t.Errorf("got %v; want an API-error result with the status", res)
	}
}

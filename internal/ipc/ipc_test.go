package ipc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, r Request)
	}{
		{name: "send", in: `{"id":"a1","type":"send_message","args":{"text":"hi","target_chat":"x@g.us"}}`,
			check: func(t *testing.T, r Request) {
				a, ok := r.Args.(SendMessageArgs)
				if !ok || a.Text != "hi" || a.TargetChat != "x@g.us" {
					t.Errorf("got %#v", r.Args)
				}
			}},
		{name: "pause", in: `{"id":"a2","type":"pause_task","args":{"task_id":"t1"}}`,
			check: func(t *testing.T, r Request) {
				if a, ok := r.Args.(TaskIDArgs); !ok || a.TaskID != "t1" || r.Type != TypePauseTask || a.requestType() != TypePauseTask {
					t.Errorf("got %#v", r)
				}
			}},
		{name: "list without args", in: `{"id":"a3","type":"list_tasks"}`,
			check: func(t *testing.T, r Request) {
				if _, ok := r.Args.(ListTasksArgs); !ok {
					t.Errorf("got args %#v; want ListTasksArgs", r.Args)
				}
			}},
		{name: "unknown envelope field", in: `{"id":"a4","type":"list_tasks","args":{},"group":"main"}`, wantErr: "unknown field"},
		{name: "unknown arg field", in: `{"id":"a5","type":"send_message","args":{"text":"x","chat":"y"}}`, wantErr: "unknown field"},
		{name: "unknown type", in: `{"id":"a6","type":"rm_rf","args":{}}`, wantErr: "unknown request type"},
		{name: "hostile id", in: `{"id":"../../etc/passwd","type":"list_tasks"}`, wantErr: "not a valid id"},
		{name: "empty text", in: `{"id":"a7","type":"send_message","args":{"text":"  "}}`, wantErr: "text is empty"},
		{name: "bad kind", in: `{"id":"a8","type":"schedule_task","args":{"prompt":"p","schedule_type":"daily","schedule_value":"x"}}`, wantErr: "schedule_type"},
		{name: "not json", in: `{"id":`, wantErr: "invalid ipc payload"},
		{name: "trailing", in: `{"id":"a9","type":"list_tasks"} {}`, wantErr: "trailing"},
		{name: "oversized", in: `{"id":"b1","type":"send_message","args":{"text":"` + strings.Repeat("x", MaxTextBytes+1) + `"}}`, wantErr: "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("got %v; want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v; want nil", err)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestRequestRoundTrip(t *testing.T) {
	prompt := "check the weather"
	r := NewRequest(UpdateTaskArgs{TaskID: "task-1", Prompt: &prompt})
	dir := t.TempDir()
	if err := WriteJSON(dir, r.FileName(), r); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, r.FileName()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Args.(UpdateTaskArgs)
	if got.ID != r.ID || got.Type != TypeUpdateTask || a.TaskID != "task-1" || *a.Prompt != prompt {
		t.Fatalf("got %#v; want %#v", got, r)
	}
}

func TestListOrderAndTmp(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := 0; i < 50; i++ {
		n := NewName() + ".json"
		want = append(want, n)
		if err := WriteFileAtomic(dir, n, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "half.json.tmp"), []byte("{"), 0o644)
	got, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("List order: got %v; want %v", got, want)
	}
	if none, err := List(filepath.Join(dir, "missing")); err != nil || len(none) != 0 {
		t.Fatalf("missing dir: got %v, %v; want empty, nil", none, err)
	}
}

func TestWatcherWakesOnNewFile(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWatcher(time.Hour) // the sweep must not be what finds the file
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan string, 16)
	go w.Run(ctx, func(d string) {
		names, _ := List(d)
		for _, n := range names {
			seen <- n
			os.Remove(filepath.Join(d, n))
		}
	})
	name := NewName() + ".json"
	if err := WriteJSON(dir, name, Input{Type: InputMessage, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got != name {
			t.Fatalf("got %s; want %s", got, name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not report the new file")
	}
}

func TestDecodeInputAndEvent(t *testing.T) {
	if _, err := DecodeInput([]byte(`{"type":"message","text":"hi","extra":1}`)); err == nil {
		t.Error("unknown field accepted in input")
	}
	if in, err := DecodeInput([]byte(`{"type":"message","text":"hi"}`)); err != nil || in.Text != "hi" {
		t.Errorf("got %v, %v", in, err)
	}
	if _, err := DecodeEvent([]byte(`{"type":"bogus"}`)); err == nil {
		t.Error("unknown event type accepted")
	}
	ev, err := DecodeEvent([]byte(`{"type":"result","text":"ok","is_error":true,"new_field":1}`))
	if err != nil || ev.Text != "ok" || !ev.IsError {
		t.Errorf("got %+v, %v", ev, err)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"1732611200000-ab12": true, "a.b_c-d": true, strings.Repeat("x", 128): true,
		"": false, strings.Repeat("x", 129): false, "-x": false, ".hidden": false,
		"a/b": false, "../x": false, "a b": false, "é": false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v; want %v", id, got, want)
		}
	}
}

// An approval_wait line names its call with identifiers; anything else in
// it is refused, as a tool name with controls is in ask_approval.
func TestApprovalWaitAndToolNames(t *testing.T) {
	ev, err := DecodeEvent([]byte(`{"type":"approval_wait","tool_use_id":"toolu_01A","tool":"mcp__github__create_issue","key":"k"}`))
	if err != nil || ev.Tool != "mcp__github__create_issue" || ev.ToolUseID != "toolu_01A" || ev.Key != "k" {
		t.Fatalf("DecodeEvent = %+v, %v", ev, err)
	}
	for _, line := range []string{
		`{"type":"approval_wait","tool_use_id":"toolu_1","tool":"Bash\u001b[2J"}`,
		`{"type":"approval_wait","tool_use_id":"toolu 1","tool":"Bash"}`,
		`{"type":"approval_wait","tool":"Bash"}`,
	} {
		if _, err := DecodeEvent([]byte(line)); err == nil {
			t.Errorf("DecodeEvent(%s) accepted", line)
		}
	}
	for name, ok := range map[string]bool{
		"Bash": true, "mcp__bridge__send_message": true, "Web-Fetch_2": true,
		"": false, "1Bash": false, "Bash\n": false, "Ba`sh": false, "Bash\u202e": false,
		strings.Repeat("a", MaxToolName): true, strings.Repeat("a", MaxToolName+1): false,
	} {
		if ValidToolName(name) != ok {
			t.Errorf("ValidToolName(%q) = %v; want %v", name, !ok, ok)
		}
	}
}

// A fetched line names WebFetch or WebSearch and at most MaxFetchedBytes.
func TestFetchedEvent(t *testing.T) {
	ev, err := DecodeEvent([]byte(`{"type":"fetched","tool":"WebFetch","what":"https://a.example/"}`))
	if err != nil || ev.Tool != "WebFetch" || ev.What != "https://a.example/" {
		t.Fatalf("DecodeEvent = %+v, %v", ev, err)
	}
	for _, line := range []string{
		`{"type":"fetched","tool":"Bash","what":"x"}`,
		`{"type":"fetched","tool":"WebSearch","what":"` + strings.Repeat("a", MaxFetchedBytes+1) + `"}`,
	} {
		if _, err := DecodeEvent([]byte(line)); err == nil {
			t.Errorf("DecodeEvent(%.60s) accepted", line)
		}
	}
}

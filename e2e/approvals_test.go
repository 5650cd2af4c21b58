package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

var approvalRE = regexp.MustCompile(`Approval ([a-z0-9]{4}): group (\S+) wants to`)

// waitApproval waits for the next approval request in the main chat after
// id and returns its short id and the message's id.
func (e *env) waitApproval(after int64, within time.Duration) (string, int64) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for cursor := after; ; {
		left := time.Until(deadline)
		if left <= 0 {
			e.t.Fatalf("no approval request in the main chat after #%d within %s", after, within)
		}
		for _, m := range e.messages("local:main", cursor, min(left, 20*time.Second).Round(time.Second)+time.Second) {
			cursor = max(cursor, m.ID)
			if m.Direction == "out" {
				if g := approvalRE.FindStringSubmatch(m.Text); g != nil {
					return g[1], m.ID
				}
			}
		}
	}
}

// requestsSince counts the approval requests in the main chat after id.
func (e *env) requestsSince(after int64) int {
	n := 0
	for _, m := range e.outSince("local:main", after) {
		if approvalRE.MatchString(m.Text) {
			n++
		}
	}
	return n
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// In an ask group a command that writes waits for the owner: approved it
// runs once; denied, or not answered in time, the model is told; the same
// command asks again; --always stops asking for it; writes in the group's
// own folder run freely. A read-only group never asks and never writes; a
// chat group has no tools but bridged's own.
func TestE2EApprovalsAskProfile(t *testing.T) {
	parallel(t, long)
	e := newEnv(t, "--idle-timeout", "5m")
	e.extraEnv = append(e.extraEnv, "BRIDGED_APPROVAL_TIMEOUT=25s")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	e.mustCLI("groups", "add", "--name", "ro", "--no-trigger", "--tools", "read-only", "local:ro")
	e.mustCLI("groups", "add", "--name", "talk", "--no-trigger", "--tools", "chat", "local:talk")
	if list := e.mustCLI("groups", "list"); !regexp.MustCompile(`fam\s.*\sask\s`).MatchString(list) || !strings.Contains(list, "read-only") {
		t.Fatalf("groups list:\n%s\nwant fam shown with ask (the default) and ro read-only", list)
	}
	d := e.start()
	famDir := filepath.Join(e.home, "groups", "fam")
	const wait = 90 * time.Second

	// Approved: exactly that command runs, once.
	mainFrom := lastID(e, "local:main")
	id := e.post("local:fam", "fake:bash touch made-1 && echo did-1")
	req, reqMsg := e.waitApproval(mainFrom, wait)
	if exists(filepath.Join(famDir, "made-1")) {
		t.Fatal("the command ran before it was approved")
	}
	if out := e.mustCLI("approvals", "--open"); !strings.Contains(out, req) || !strings.Contains(out, "touch made-1") {
		t.Errorf("approvals --open:\n%s\nwant %s with its command", out, req)
	}
	e.mustCLI("approve", req)
	if got := e.waitOut("local:fam", id, 1, wait)[0].Text; got != "did-1" {
		t.Fatalf("fam got %q after the approval; want did-1", got)
	}
	if !exists(filepath.Join(famDir, "made-1")) {
		t.Error("the approved command did not run")
	}
	if _, err := e.cli("approve", req); err == nil {
		t.Error("a second approve of the same request succeeded; want it refused as settled")
	}

	// The same command asks again; denied, the model is told.
	id = e.post("local:fam", "fake:bash touch made-2 && echo did-2")
	req2, reqMsg2 := e.waitApproval(reqMsg, wait)
	if req2 == req {
		t.Fatal("the second request reused the first id")
	}
	e.mustCLI("deny", req2)
	if got := e.waitOut("local:fam", id, 1, wait)[0].Text; !strings.Contains(got, "tool error: not approved by the owner") {
		t.Fatalf("fam got %q after the deny; want the tool error the model saw", got)
	}
	if exists(filepath.Join(famDir, "made-2")) {
		t.Error("the denied command ran")
	}

	// The owner's reply in the main chat answers.
	id = e.post("local:fam", "fake:bash touch made-3 && echo did-3")
	req3, reqMsg3 := e.waitApproval(reqMsg2, wait)
	if err := e.api("POST", "/v1/chats/local:main/messages", map[string]any{"sender": "", "text": "yes " + req3}, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.waitOut("local:fam", id, 1, wait)[0].Text; got != "did-3" {
		t.Fatalf("fam got %q after the owner's yes; want did-3", got)
	}

	// Not answered: denied at the timeout, the model told.
	id = e.post("local:fam", "fake:bash touch late && echo did-late")
	_, reqMsg4 := e.waitApproval(reqMsg3, wait)
	if got := e.waitOut("local:fam", id, 1, wait)[0].Text; !strings.Contains(got, "did not answer") {
		t.Fatalf("fam got %q at the timeout; want told it was not approved", got)
	}
	if exists(filepath.Join(famDir, "late")) {
		t.Error("the unanswered command ran")
	}

	// --always: the rule stops asking.
	id = e.post("local:fam", "fake:bash touch again && echo always")
	req5, reqMsg5 := e.waitApproval(reqMsg4, wait)
	e.mustCLI("approve", "--always", req5)
	e.waitOut("local:fam", id, 1, wait)
	if got := e.ask("local:fam", "fake:bash touch again && echo always", wait); got != "always" {
		t.Fatalf("fam got %q for the command with a standing rule; want it run", got)
	}
	if n := e.requestsSince(reqMsg5); n != 0 {
		t.Errorf("%d approval requests after --always; want none", n)
	}
	if rules := e.mustCLI("approvals", "rules"); !strings.Contains(rules, "Bash(touch again && echo always)") {
		t.Errorf("approvals rules:\n%s\nwant the rule", rules)
	}

	// Writes in the group's own folder run freely.
	if got := e.ask("local:fam", "fake:write free.txt hello", wait); !strings.HasPrefix(got, "wrote ") {
		t.Errorf("fam got %q for a write in its folder; want it written", got)
	}
	if n := e.requestsSince(reqMsg5); n != 0 {
		t.Errorf("a write in the group's folder asked the owner")
	}

	// read-only: never asks, never writes.
	roDir := filepath.Join(e.home, "groups", "ro")
	if got := e.ask("local:ro", "fake:bash echo looking", wait); got != "looking" {
		t.Errorf("ro got %q for a read-only command; want it run", got)
	}
	if got := e.ask("local:ro", "fake:bash touch ro-made && echo no", wait); !strings.Contains(got, "read-only") {
		t.Errorf("ro got %q for a command that writes; want refused", got)
	}
	if got := e.ask("local:ro", "fake:write x.txt no", wait); !strings.Contains(got, "No such tool available: Write") {
		t.Errorf("ro got %q for a write; want no Write tool", got)
	}
	if exists(filepath.Join(roDir, "ro-made")) || exists(filepath.Join(roDir, "x.txt")) {
		t.Error("the read-only group wrote")
	}

	// chat: bridged's own tools only.
	if got := e.ask("local:talk", "fake:bash echo hi", wait); !strings.Contains(got, "No such tool available: Bash") {
		t.Errorf("talk got %q for Bash; want no such tool", got)
	}
	if got := e.ask("local:talk", `fake:tool send_message {"text":"from the tool"}`, wait); strings.Contains(got, "tool error") {
		t.Errorf("talk got %q for send_message; want bridged's own tool to work", got)
	}
	if n := e.requestsSince(reqMsg5); n != 0 {
		t.Errorf("%d approval requests from read-only or chat groups; want none", n)
	}

	hist := e.mustCLI("approvals")
	for _, want := range []string{req + " ", req2 + " ", "allowed", "denied", "timeout", "chat"} {
		if !strings.Contains(hist, want) {
			t.Errorf("approvals:\n%s\nwant %q", hist, want)
		}
	}
	d.stop(t)
}

// A daemon killed with an approval open settles it at the next start as
// denied, with one notice; the cut-off turn runs again and asks anew.
func TestE2EApprovalOpenAtKill9(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5m")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	const wait = 90 * time.Second
	mainFrom := lastID(e, "local:main")
	e.post("local:fam", "fake:bash touch killed && echo ran")
	req, reqMsg := e.waitApproval(mainFrom, wait)
	d.kill9()

	d = e.start()
	req2, _ := e.waitApproval(reqMsg, wait) // the cut-off turn asks again
	if req2 == req {
		t.Fatal("the restarted turn reused the settled request")
	}
	notices := 0
	for _, m := range e.outSince("local:main", reqMsg) {
		if strings.Contains(m.Text, "Approval "+req) && strings.Contains(m.Text, "was open when bridged stopped: denied") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d restart notices for %s; want 1", notices, req)
	}
	list := e.mustCLI("approvals")
	if !regexp.MustCompile(req + `\s.*denied\s.*restart`).MatchString(list) {
		t.Errorf("approvals:\n%s\nwant %s denied by restart", list, req)
	}
	if _, err := e.cli("approve", req); err == nil {
		t.Error("approving the request settled at restart succeeded")
	}
	e.mustCLI("deny", req2)
	if exists(filepath.Join(e.home, "groups", "fam", "killed")) {
		t.Error("the command ran without an approval")
	}
	d.stop(t)
}

// A container that ends while its approval waits (here it is killed: the
// container timeout does not stop a turn waiting for the owner) has the
// request denied then, once, with a notice; the retried turn asks anew.
func TestE2EApprovalOpenWhenContainerEnds(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "5s", "--retry-base", "100ms")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	const wait = 120 * time.Second
	mainFrom := lastID(e, "local:main")
	id := e.post("local:fam", "fake:bash touch gone && echo ran")
	req, reqMsg := e.waitApproval(mainFrom, wait)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live := e.containers(ctx)
	if len(live) != 1 {
		t.Fatalf("containers: %+v; want the one whose turn waits", live)
	}
	if _, err := docker.ContainerKill(ctx, live[0].ID, client.ContainerKillOptions{}); err != nil {
		t.Fatal(err)
	}
	req2, _ := e.waitApproval(reqMsg, wait) // the container was killed; the retried turn asks again
	if req2 == req {
		t.Fatal("the retried turn reused the settled request")
	}
	notices := 0
	for _, m := range e.outSince("local:main", reqMsg) {
		if strings.Contains(m.Text, "Approval "+req) && strings.Contains(m.Text, "was open when its container ended: denied") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d notices for %s; want 1", notices, req)
	}
	e.mustCLI("deny", req2)
	if got := e.waitOut("local:fam", id, 1, wait)[0].Text; !strings.Contains(got, "not approved") {
		t.Errorf("fam got %q; want the denial told", got)
	}
	if exists(filepath.Join(e.home, "groups", "fam", "gone")) {
		t.Error("the command ran without an approval")
	}
	d.stop(t)
}

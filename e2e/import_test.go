package e2e

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/nanoclaw/nanoclawtest"
)

const nanoSession = "6f1d0c9e-0000-4000-8000-00000000e2e0"

// nanoClawInstall writes a NanoClaw install (its directory and its
// ~/.config/nanoclaw) whose chats are local ones: a main group with its
// memory, a Claude session and an interval task due at due; a team group
// answering everyone but allowing only local:carol, with a mount outside
// the mount allowlist; the global memory.
func nanoClawInstall(t *testing.T, due time.Time) (dir, cfg string) {
	t.Helper()
	base := t.TempDir()
	dir, cfg = filepath.Join(base, "nanoclaw"), filepath.Join(base, "config")
	for _, d := range []string{filepath.Join(dir, "store"), filepath.Join(dir, "groups", "main"), filepath.Join(dir, "groups", "team"),
		filepath.Join(dir, "groups", "global"), filepath.Join(dir, "data", "sessions", "main", ".claude", "projects", "-workspace-group"),
		cfg, filepath.Join(base, "shared"), filepath.Join(base, "private")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(dir, "groups", "main", "CLAUDE.md"):   "# Main\nThe owner likes green tea.\n",
		filepath.Join(dir, "groups", "team", "CLAUDE.md"):   "# Team\nStand-up is at nine.\n",
		filepath.Join(dir, "groups", "global", "CLAUDE.md"): "# Everyone\nAnswer in English.\n",
		filepath.Join(dir, "data", "sessions", "main", ".claude", "projects", "-workspace-group", nanoSession+".jsonl"): `{"type":"user","uuid":"11111111-2222-4333-8444-555555555555","sessionId":"` +
			nanoSession + `","message":{"role":"user","content":"hello"}}` + "\n",
		filepath.Join(cfg, "sender-allowlist.json"): `{"default":{"allow":"*","mode":"trigger"},"chats":{"local:team":{"allow":["local:carol"],"mode":"trigger"}},"logDenied":true}`,
		filepath.Join(cfg, "mount-allowlist.json"):  `{"allowedRoots":[{"path":"` + filepath.Join(base, "shared") + `","allowReadWrite":false}],"blockedPatterns":[],"nonMainReadOnly":true}`,
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "store", "messages.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	iso := func(d time.Duration) string { return now.Add(d).Format("2006-01-02T15:04:05.000Z") }
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{sql: nanoclawtest.SchemaV1239},
		{`INSERT INTO registered_groups VALUES ('local:main', 'Main', 'main', '@Andy', ?, NULL, 0, 1)`, []any{iso(-72 * time.Hour)}},
		{`INSERT INTO registered_groups VALUES ('local:team', 'Team', 'team', '@Andy', ?, ?, 0, 0)`, []any{iso(-48 * time.Hour),
			`{"additionalMounts":[{"hostPath":"` + filepath.Join(base, "private") + `","readonly":true}]}`}},
		{`INSERT INTO chats VALUES ('local:main', 'Main', ?, 'local', 0), ('local:team', 'Team', ?, 'local', 1)`, []any{iso(-time.Hour), iso(-time.Hour)}},
		{`INSERT INTO messages VALUES ('nc-1', 'local:main', 'local:owner', 'Owner', 'remember the tea', ?, 1, 0), ('nc-2', 'local:main', 'andy', 'Andy', 'Andy: noted', ?, 1, 1)`,
			[]any{iso(-2 * time.Hour), iso(-2*time.Hour + time.Second)}},
		{`INSERT INTO router_state VALUES ('last_agent_timestamp', ?)`, []any{`{"local:main":"` + iso(-2*time.Hour+time.Second) + `"}`}},
		{`INSERT INTO sessions VALUES ('main', ?)`, []any{nanoSession}},
		{`INSERT INTO scheduled_tasks VALUES ('task-1764000000000-e2e001', 'main', 'local:main', 'fake:reply the imported task fired', 'interval', '3600000', ?, NULL, NULL, 'active', ?, 'isolated', NULL)`,
			[]any{due.UTC().Format("2006-01-02T15:04:05.000Z"), iso(-24 * time.Hour)}},
		{`INSERT INTO scheduled_tasks VALUES ('task-1764000000000-e2e002', 'team', 'local:team', 'fake:reply paused', 'cron', '0 9 * * 1', ?, NULL, NULL, 'paused', ?, 'group', NULL)`,
			[]any{iso(24 * time.Hour), iso(-24 * time.Hour)}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	return dir, cfg
}

func nanoClawDB(dir string) string { return filepath.Join(dir, "store", "messages.db") }

// sqlExec runs one statement on the SQLite database at path.
func sqlExec(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// importSteps returns the "+" lines of an import's output: what it does.
func importSteps(out string) []string {
	var steps []string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "  + "); ok {
			steps = append(steps, s)
		}
	}
	return steps
}

// waitOutText waits until an outbound message of chat after id holds text
// and returns it.
func (e *env) waitOutText(chat string, after int64, text string, within time.Duration) chatMessage {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for cursor := after; ; {
		left := time.Until(deadline)
		if left <= 0 {
			e.t.Fatalf("no reply in %s holding %q within %s; got %+v", chat, text, within, e.outSince(chat, after))
		}
		for _, m := range e.messages(chat, cursor, min(left, 20*time.Second).Round(time.Second)+time.Second) {
			cursor = max(cursor, m.ID)
			if m.Direction == "out" && strings.Contains(m.Text, text) {
				return m
			}
		}
	}
}

// A NanoClaw v1 install built from its schema comes over in one command:
// bad input (not NanoClaw, a newer schema, a locked database) is refused
// with nothing written, the dry run lists exactly
// what --apply then does, a second import does nothing, NanoClaw's tree is
// never written. Then bridged runs it: the main group resumes its Claude
// session with its memory in place, the team group's agent gets its own
// and the global memory, the imported interval task fires when due, and the
// team's sender allow list holds (bob wakes nothing, carol does).
func TestE2EImportNanoClaw(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "1m")
	allowlist := filepath.Join(t.TempDir(), "bridged", "mount-allowlist.json")
	e.extraEnv = append(e.extraEnv, "BRIDGED_MOUNT_ALLOWLIST="+allowlist)
	due := time.Now().Add(45 * time.Second)
	dir, cfg := nanoClawInstall(t, due)
	before := nanoclawtest.TreeHash(t, filepath.Dir(dir))

	// Not a NanoClaw directory: a clear error, nothing written.
	if _, err := e.cli("import", "nanoclaw", "--apply", "--config", cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a NanoClaw v1 directory") {
		t.Fatalf("import of an empty directory: %v; want it refused as not a NanoClaw directory", err)
	}
	if ents, _ := os.ReadDir(e.home); len(ents) != 0 {
		t.Fatalf("a refused import wrote %v into the home", ents)
	}
	// A newer schema than v1.2.39's, and a database another process holds
	// locked: clear errors, nothing written.
	newer, newerCfg := nanoClawInstall(t, due)
	sqlExec(t, nanoClawDB(newer), `ALTER TABLE scheduled_tasks ADD COLUMN agent_group_id TEXT`)
	if _, err := e.cli("import", "nanoclaw", "--apply", "--config", newerCfg, newer); err == nil || !strings.Contains(err.Error(), "newer than v1.2.39") ||
		!strings.Contains(err.Error(), "scheduled_tasks.agent_group_id") {
		t.Errorf("import of a newer schema: %v; want it refused, naming the column", err)
	}
	locked, lockedCfg := nanoClawInstall(t, due)
	holder, err := sql.Open("sqlite", "file:"+nanoClawDB(locked))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	holder.SetMaxOpenConns(1)
	for _, q := range []string{`BEGIN EXCLUSIVE`, `INSERT INTO router_state VALUES ('last_timestamp', 'x')`} {
		if _, err := holder.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cli("import", "nanoclaw", "--apply", "--config", lockedCfg, locked); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("import of a locked database: %v; want it refused as locked", err)
	}
	if _, err := holder.Exec(`ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(e.home); len(ents) != 0 {
		t.Fatalf("a refused import wrote %v into the home", ents)
	}

	dry := e.mustCLI("import", "nanoclaw", "--config", cfg, dir)
	if ents, _ := os.ReadDir(e.home); len(ents) != 0 {
		t.Fatalf("the dry run wrote %v into the home", ents)
	}
	applied := e.mustCLI("import", "nanoclaw", "--apply", "--config", cfg, dir)
	if !slices.Equal(importSteps(dry), importSteps(applied)) || len(importSteps(dry)) == 0 {
		t.Fatalf("the dry run listed\n%s\n--apply did\n%s", dry, applied)
	}
	for _, want := range []string{"register group main", "register group team", "allow local:carol, others context", "Claude session " + nanoSession,
		"task task-1764000000000-e2e001 of group main: interval 1h0m0s", "task task-1764000000000-e2e002 of group team: cron 0 9 * * 1, context group, paused",
		"groups/global", "mount allowlist: write " + allowlist} {
		if !strings.Contains(applied, want) {
			t.Errorf("the import does not say %q:\n%s", want, applied)
		}
	}
	for _, want := range []string{"Not carried over", filepath.Join(filepath.Dir(dir), "private"), "bridged login"} {
		if !strings.Contains(applied, want) {
			t.Errorf("the import does not say %q:\n%s", want, applied)
		}
	}
	again := e.mustCLI("import", "nanoclaw", "--apply", "--config", cfg, dir)
	if len(importSteps(again)) != 0 || !strings.Contains(again, "nothing new to import") || !strings.Contains(again, "Already in bridged") {
		t.Errorf("a second import did something:\n%s", again)
	}
	if nanoclawtest.TreeHash(t, filepath.Dir(dir)) != before {
		t.Error("the import wrote into NanoClaw's tree")
	}

	e.start()
	if _, err := e.cli("import", "nanoclaw", "--apply", "--config", cfg, dir); err == nil || !strings.Contains(err.Error(), "bridged is running") {
		t.Errorf("import --apply while bridged runs: %v; want it refused", err)
	}

	// The main group resumes NanoClaw's session, its memory in place.
	id := e.post("local:main", "fake:pid\nfake:memory")
	got := e.waitOutText("local:main", id, "session=", 2*time.Minute).Text
	if !strings.Contains(got, "session="+nanoSession) || !strings.Contains(got, "The owner likes green tea.") {
		t.Errorf("main's agent said %q; want NanoClaw's session %s resumed and its CLAUDE.md loaded", got, nanoSession)
	}
	// The team's agent has its own memory and the global one.
	id = e.post("local:team", "fake:memory")
	got = e.waitOutText("local:team", id, "system prompt appended", 2*time.Minute).Text
	if !strings.Contains(got, "Stand-up is at nine.") || !strings.Contains(got, "Answer in English.") {
		t.Errorf("team's agent was given %q; want the team's and the global memory", got)
	}
	// The team's allow list holds: bob wakes nothing, carol does.
	out, errs, code, _ := e.chatM("team", "bob would like an answer", "--as", "bob", "--timeout", "60s")
	if code != 3 || !strings.Contains(errs, "sender not allowed") || out != "" {
		t.Errorf("chat --as bob in team: exit %d, stdout %q, stderr %q; want exit 3, sender not allowed", code, out, errs)
	}
	if got := e.outSince("local:team", id); len(got) != 1 {
		t.Errorf("replies in team after bob's message: %+v; want only the one to the owner's fake:memory", got)
	}
	carol, err := e.postAs("local:team", "carol", "fake:reply carol is allowed")
	if err != nil {
		t.Fatal(err)
	}
	e.waitOutText("local:team", carol, "carol is allowed", 2*time.Minute)
	// The imported task fires when it is due.
	fired := e.waitOutText("local:main", 0, "the imported task fired", 3*time.Minute)
	if at, err := time.Parse(time.RFC3339Nano, fired.Time); err != nil || at.Before(due.Add(-time.Second)) {
		t.Errorf("the imported task's output came at %q (%v); want it after the task was due, %s", fired.Time, err, due.Format(time.RFC3339))
	}
}

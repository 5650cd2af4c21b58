package nanoclaw_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/nanoclaw"
	"github.com/bridged-app/bridged/internal/nanoclaw/nanoclawtest"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

const (
	mainJID   = "120363000000000001@g.us"
	familyJID = "120363000000000002@g.us"
	sessionID = "0b5c2f7e-1111-4222-8333-444455556666"
)

// install writes a NanoClaw install with every column in use and awkward
// rows; it returns its directory, its configuration directory and an
// allowed host directory.
func install(t *testing.T, now time.Time) (dir, cfgDir, allowed string) {
	t.Helper()
	base := t.TempDir()
	dir, cfgDir = filepath.Join(base, "nanoclaw"), filepath.Join(base, "config")
	allowed = filepath.Join(base, "projects", "notes")
	outside := filepath.Join(base, "elsewhere")
	for _, d := range []string{filepath.Join(dir, "store"), cfgDir, allowed, outside, filepath.Join(dir, "groups", "main", "docs"),
		filepath.Join(dir, "groups", "family_chat"), filepath.Join(dir, "groups", "global"),
		filepath.Join(dir, "data", "sessions", "main", ".claude", "projects", "-workspace-group")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "groups", "main", "CLAUDE.md"), "# Main memory\nThe owner likes tea.\n")
	write(filepath.Join(dir, "groups", "main", "docs", "plan.txt"), "plan\n")
	write(filepath.Join(dir, "groups", "family_chat", "CLAUDE.md"), "# Family\n")
	write(filepath.Join(dir, "groups", "global", "CLAUDE.md"), "# Global memory\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "groups", "main", "passwd")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "data", "sessions", "main", ".claude", "projects", "-workspace-group", sessionID+".jsonl"), `{"type":"user"}`+"\n")
	write(filepath.Join(cfgDir, "mount-allowlist.json"), `{"allowedRoots":[{"path":"`+filepath.Dir(allowed)+`","allowReadWrite":true,"description":"projects"}],"blockedPatterns":["secret-stuff"],"nonMainReadOnly":true}`)
	write(filepath.Join(cfgDir, "sender-allowlist.json"), `{"default":{"allow":"*","mode":"trigger"},"chats":{"`+familyJID+`":{"allow":["4915100000001@s.whatsapp.net"],"mode":"drop"}},"logDenied":true}`)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "store", "messages.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	iso := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02T15:04:05.000Z") }
	stmts := []string{nanoclawtest.SchemaV1239, `PRAGMA journal_mode=WAL`}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO registered_groups VALUES (?, 'Main', 'main', '@Andy', ?, ?, 0, 1)`, mainJID, iso(-48*time.Hour),
		`{"additionalMounts":[{"hostPath":"`+allowed+`","containerPath":"notes","readonly":false},{"hostPath":"`+outside+`"}],"timeout":600000}`)
	exec(`INSERT INTO registered_groups VALUES (?, 'Family', 'family_chat', '@Andy', ?, NULL, 1, 0)`, familyJID, iso(-24*time.Hour))
	exec(`INSERT INTO registered_groups VALUES ('tg:12345', 'Telegram', 'telegram', '@Andy', ?, NULL, 1, 0)`, iso(-time.Hour))
	exec(`INSERT INTO chats VALUES (?, 'Main', ?, 'whatsapp', 1), (?, 'Family', ?, 'whatsapp', 1), ('999@s.whatsapp.net', 'Someone', ?, 'whatsapp', 0)`,
		mainJID, iso(-time.Hour), familyJID, iso(-time.Hour), iso(-time.Hour))
	exec(`INSERT INTO messages VALUES ('M1', ?, '4915100000009@s.whatsapp.net', 'Owner', 'hello andy', ?, 1, 0),
		('M2', ?, '4915100000009@s.whatsapp.net', 'Andy', 'Andy: hi', ?, 1, 1),
		('F1', ?, '4915100000001@s.whatsapp.net', 'Aunt', 'seen', ?, 0, 0),
		('F2', ?, '4915100000001@s.whatsapp.net', 'Aunt', 'not seen yet', ?, 0, 0),
		('X1', '999@s.whatsapp.net', '999@s.whatsapp.net', 'Someone', 'private', ?, 0, 0)`,
		mainJID, iso(-3*time.Hour), mainJID, iso(-3*time.Hour+time.Second), familyJID, iso(-2*time.Hour), familyJID, iso(-30*time.Minute), iso(-time.Hour))
	exec(`INSERT INTO router_state VALUES ('last_timestamp', ?), ('last_agent_timestamp', ?)`, iso(-30*time.Minute),
		`{"`+mainJID+`":"`+iso(-3*time.Hour+time.Second)+`","`+familyJID+`":"`+iso(-2*time.Hour)+`"}`)
	exec(`INSERT INTO sessions VALUES ('main', ?), ('family_chat', 'no-such-transcript')`, sessionID)
	exec(`INSERT INTO scheduled_tasks VALUES ('task-1700000000000-cron01', 'main', ?, 'morning news', 'cron', '0 9 * * *', ?, ?, 'ok', 'active', ?, 'group', NULL)`,
		mainJID, iso(5*time.Hour), iso(-19*time.Hour), iso(-40*time.Hour))
	exec(`INSERT INTO scheduled_tasks VALUES ('task-1700000000000-int001', 'family_chat', ?, 'water the plants', 'interval', '3600000', ?, NULL, NULL, 'active', ?, 'isolated', NULL)`,
		familyJID, iso(-2*time.Hour), iso(-40*time.Hour))
	exec(`INSERT INTO scheduled_tasks VALUES ('task-1700000000000-pause1', 'main', ?, 'paused one', 'interval', '600000', ?, NULL, NULL, 'paused', ?, 'isolated', NULL)`,
		mainJID, iso(time.Hour), iso(-40*time.Hour))
	exec(`INSERT INTO scheduled_tasks VALUES ('task-1700000000000-once01', 'main', ?, 'remind me', 'once', ?, ?, NULL, NULL, 'active', ?, 'isolated', NULL)`,
		mainJID, now.Add(-5*time.Hour).UTC().Format(time.RFC3339), iso(-5*time.Hour), iso(-40*time.Hour))
	exec(`INSERT INTO scheduled_tasks VALUES ('task-1700000000000-done01', 'main', ?, 'old', 'once', ?, NULL, ?, 'done', 'completed', ?, 'isolated', NULL)`,
		mainJID, now.Add(-30*time.Hour).UTC().Format(time.RFC3339), iso(-30*time.Hour), iso(-40*time.Hour))
	exec(`INSERT INTO scheduled_tasks VALUES ('task-1700000000000-scrpt1', 'main', ?, 'check', 'cron', '*/5 * * * *', ?, NULL, NULL, 'active', ?, 'isolated', 'exit 0')`,
		mainJID, iso(time.Hour), iso(-40*time.Hour))
	exec(`INSERT INTO task_run_logs (task_id, run_at, duration_ms, status, result, error) VALUES ('task-1700000000000-cron01', ?, 1200, 'success', 'ok', NULL)`, iso(-19*time.Hour))
	return dir, cfgDir, allowed
}

func texts(p *nanoclaw.Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Text)
	}
	return out
}

func TestImportPlanApplyTwice(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	dir, cfgDir, allowed := install(t, now)
	before := nanoclawtest.TreeHash(t, filepath.Dir(dir))

	bhome := t.TempDir()
	if err := (home.Layout{Dir: bhome}).Prepare(); err != nil {
		t.Fatal(err)
	}
	db := storetest.OpenHome(t, bhome)
	h, err := home.New(bhome, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	target := nanoclaw.Target{DB: db, Home: home.Layout{Dir: bhome}, Allowlist: filepath.Join(t.TempDir(), "bridged", "mount-allowlist.json"),
		Protect: []string{bhome}, Assistant: "Andy", Loc: time.UTC, Now: now}

	in, err := nanoclaw.Read(ctx, dir, cfgDir)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := nanoclaw.MakePlan(ctx, in, target)
	if err != nil {
		t.Fatal(err)
	}
	done, err := nanoclaw.Apply(ctx, dry, db, h)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, texts(dry)) {
		t.Fatalf("apply did\n%s\nthe dry run said\n%s", strings.Join(done, "\n"), strings.Join(texts(dry), "\n"))
	}
	joined := strings.Join(done, "\n")
	skipped := ""
	for _, s := range dry.Skipped {
		skipped += s.What + ": " + s.Why + "\n"
	}
	for _, want := range []string{"register group main", "register group family-chat", "folder family_chat becomes family-chat", "mount allowlist: write",
		"groups/main: copy 2 files", "groups/global", "Claude session " + sessionID, "task task-1700000000000-cron01", "context group",
		"register group telegram"} { // NanoClaw's Telegram chats are tg:<id>, as bridged's
		if !strings.Contains(joined, want) {
			t.Errorf("steps lack %q:\n%s", want, joined)
		}
	}
	for _, want := range []string{"passwd: a symbolic link", "extra mount " + filepath.Join(filepath.Dir(dir), "elsewhere"), "task task-1700000000000-done01", "task task-1700000000000-scrpt1",
		"no-such-transcript", "run history of the tasks (1 run)", "1 message of 1 chat"} {
		if !strings.Contains(skipped, want) {
			t.Errorf("not-carried-over lacks %q:\n%s", want, skipped)
		}
	}

	// What a user would notice in bridged.
	g, err := db.Groups.ByFolder(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if !g.IsMain || len(g.ContainerConfig.ExtraMounts) != 1 || g.ContainerConfig.ExtraMounts[0].HostPath != allowed || !g.ContainerConfig.ExtraMounts[0].ReadWrite {
		t.Errorf("main group %+v: want main with the one allowed read-write mount", g)
	}
	fam, err := db.Groups.ByFolder(ctx, "family-chat")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fam.Allow, []string{"4915100000001@s.whatsapp.net"}) || fam.Others != store.OthersDrop || !fam.RequiresTrigger {
		t.Errorf("family group allow %v others %s requires trigger %v: want the aunt only, drop, trigger", fam.Allow, fam.Others, fam.RequiresTrigger)
	}
	if b, err := os.ReadFile(filepath.Join(bhome, "groups", "main", "CLAUDE.md")); err != nil || !strings.Contains(string(b), "likes tea") {
		t.Errorf("groups/main/CLAUDE.md = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(bhome, "groups", "main", "passwd")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the symlink was carried over: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(bhome, "groups", "global", "CLAUDE.md")); err != nil || string(b) != "# Global memory\n" {
		t.Errorf("groups/global/CLAUDE.md = %q, %v", b, err)
	}
	if s, _ := db.Sessions.Get(ctx, "main"); s.SessionID != sessionID {
		t.Errorf("main's session = %q; want %q", s.SessionID, sessionID)
	}
	if _, err := os.Stat(filepath.Join(bhome, "data", "sessions", "main", ".claude", "projects", "-workspace-group", sessionID+".jsonl")); err != nil {
		t.Errorf("transcript: %v", err)
	}
	tasks := map[store.TaskID]store.Task{}
	ts, _ := db.Tasks.List(ctx, "")
	for _, k := range ts {
		tasks[k.ID] = k
	}
	if k := tasks["task-1700000000000-pause1"]; k.Status != store.TaskPaused {
		t.Errorf("paused task: %+v", k)
	}
	if k := tasks["task-1700000000000-once01"]; k.Status != store.TaskPaused {
		t.Errorf("once task in the past: status %s; want paused, not run", k.Status)
	}
	if k := tasks["task-1700000000000-int001"]; k.Status != store.TaskActive || k.Value != "1h0m0s" || k.NextRun == nil || !k.NextRun.After(now) || k.Folder != "family-chat" {
		t.Errorf("interval task: %+v", k)
	}
	if k := tasks["task-1700000000000-cron01"]; k.ContextMode != store.ContextGroup || k.NextRun == nil || !k.NextRun.After(now) {
		t.Errorf("cron task: %+v", k)
	}
	if _, ok := tasks["task-1700000000000-done01"]; ok || len(tasks) != 4 {
		t.Errorf("tasks %v: want the 4 not completed and without a script", tasks)
	}
	msgs, _ := db.Messages.After(ctx, familyJID, 0, 0)
	cur, _ := db.Sessions.Cursor(ctx, "family-chat")
	if len(msgs) != 2 || cur != msgs[0].ID {
		t.Errorf("family history %d messages, cursor %d: want 2, the cursor on the one its agent saw", len(msgs), cur)
	}
	if b, err := os.ReadFile(target.Allowlist); err != nil || !strings.Contains(string(b), "secret-stuff") {
		t.Errorf("bridged's allowlist = %q, %v", b, err)
	}

	// Twice: nothing new.
	in2, err := nanoclaw.Read(ctx, dir, cfgDir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := nanoclaw.MakePlan(ctx, in2, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Steps) != 0 {
		t.Errorf("a second import would do\n%s", strings.Join(texts(again), "\n"))
	}
	if len(again.Have) == 0 {
		t.Error("a second import lists nothing as already there")
	}
	if after := nanoclawtest.TreeHash(t, filepath.Dir(dir)); after != before {
		t.Error("the NanoClaw tree changed")
	}
}

func TestImportRefuses(t *testing.T) {
	ctx := context.Background()
	now := time.Now()

	t.Run("not nanoclaw", func(t *testing.T) {
		if _, err := nanoclaw.Read(ctx, t.TempDir(), t.TempDir()); !errors.Is(err, nanoclaw.ErrNotNanoClaw) {
			t.Fatalf("err = %v; want ErrNotNanoClaw", err)
		}
	})
	t.Run("newer schema", func(t *testing.T) {
		dir, cfg, _ := install(t, now)
		db, _ := sql.Open("sqlite", "file:"+nanoclaw.DBPath(dir))
		if _, err := db.Exec(`ALTER TABLE registered_groups ADD COLUMN agent_group_id TEXT`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		before := nanoclawtest.TreeHash(t, filepath.Dir(dir))
		_, err := nanoclaw.Read(ctx, dir, cfg)
		if !errors.Is(err, nanoclaw.ErrSchemaNewer) || !strings.Contains(err.Error(), "registered_groups.agent_group_id") {
			t.Fatalf("err = %v; want ErrSchemaNewer naming the column", err)
		}
		if nanoclawtest.TreeHash(t, filepath.Dir(dir)) != before {
			t.Error("the NanoClaw tree changed")
		}
	})
	t.Run("locked", func(t *testing.T) {
		dir, cfg, _ := install(t, now)
		db, _ := sql.Open("sqlite", "file:"+nanoclaw.DBPath(dir))
		defer db.Close()
		db.SetMaxOpenConns(1)
		for _, q := range []string{`PRAGMA journal_mode=DELETE`, `PRAGMA locking_mode=EXCLUSIVE`, `BEGIN EXCLUSIVE`} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		defer db.Exec(`ROLLBACK`)
		if _, err := nanoclaw.Read(ctx, dir, cfg); !errors.Is(err, nanoclaw.ErrLocked) {
			t.Fatalf("err = %v; want ErrLocked", err)
		}
	})
	t.Run("malformed sender allowlist", func(t *testing.T) {
		dir, cfg, _ := install(t, now)
		if err := os.WriteFile(filepath.Join(cfg, "sender-allowlist.json"), []byte(`{"default": {"allow": "*"`), 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := nanoclaw.Read(ctx, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		bhome := t.TempDir()
		p, err := nanoclaw.MakePlan(ctx, in, nanoclaw.Target{Home: home.Layout{Dir: bhome}, Assistant: "Andy", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range p.Skipped {
			found = found || (s.What == "the sender allow list" && strings.Contains(s.Why, "invalid JSON"))
		}
		if !found {
			t.Errorf("the malformed sender allow list is not listed: %+v", p.Skipped)
		}
		if entries, _ := os.ReadDir(bhome); len(entries) != 0 {
			t.Errorf("a dry run wrote %v", entries)
		}
	})
}

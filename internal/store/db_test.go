package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/migrations"
)

func TestOpenSettings(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	var mode string
	if err := db.write.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q; want wal", mode)
	}
	for name, q := range map[string]querier{"writer": db.write, "reader": db.read} {
		var fk, timeout int
		if err := q.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := q.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
			t.Fatal(err)
		}
		if fk != 1 || timeout != 10000 {
			t.Errorf("%s: foreign_keys = %d, busy_timeout = %d; want 1, 10000", name, fk, timeout)
		}
	}
	if _, err := db.read.ExecContext(ctx, `INSERT INTO chats (id) VALUES ('x')`); err == nil {
		t.Errorf("write through the read pool succeeded; want it refused")
	}
}

func TestOpenOddPath(t *testing.T) {
	// Characters that mean something in a URI must still name the file.
	path := filepath.Join(t.TempDir(), "a?b#c%20d", "bridged.db")
	db := openAt(t, path)
	addGroup(t, db, "local:main", "main")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at %s: %v", path, err)
	}
	db = openAt(t, path)
	if _, err := db.Groups.ByFolder(context.Background(), "main"); err != nil {
		t.Fatalf("reopen %s: GetGroupByFolder: %v; want the group", path, err)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	db := openAt(t, path)
	addGroup(t, db, "local:main", "main")
	known, err := loadMigrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = openAt(t, path)
		v, err := db.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v != len(known) {
			t.Errorf("reopen %d: schema version %d; want %d", i+1, v, len(known))
		}
		if n := count(t, db, "schema_migrations", ""); n != len(known) {
			t.Errorf("reopen %d: %d schema_migrations rows; want %d", i+1, n, len(known))
		}
		if gs, err := db.Groups.List(ctx); err != nil || len(gs) != 1 {
			t.Errorf("reopen %d: ListGroups = %d groups, %v; want 1, nil", i+1, len(gs), err)
		}
	}
}

// OpenUpTo leaves the store at the migration asked for, and Open applies
// the rest; a version that does not exist is refused.
func TestOpenUpTo(t *testing.T) {
	ctx := context.Background()
	known, err := loadMigrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bridged.db")
	old, err := OpenUpTo(ctx, path, 3, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if v, err := old.SchemaVersion(ctx); err != nil || v != 3 {
		t.Errorf("OpenUpTo 3: schema version %d, %v; want 3", v, err)
	}
	old.Close()
	db := openAt(t, path)
	if v, err := db.SchemaVersion(ctx); err != nil || v != len(known) {
		t.Errorf("Open after OpenUpTo 3: schema version %d, %v; want %d", v, err, len(known))
	}
	for _, v := range []int{0, len(known) + 1} {
		if db, err := OpenUpTo(ctx, filepath.Join(t.TempDir(), "bridged.db"), v, zerolog.Nop()); err == nil {
			db.Close()
			t.Errorf("OpenUpTo %d: no error; want one naming the migrations there are", v)
		}
	}
}

func TestSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	db := openAt(t, path)
	if _, err := db.write.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err := Open(ctx, path, zerolog.Nop())
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open on a newer database = %v; want ErrSchemaTooNew", err)
	}
	known, _ := loadMigrations(migrations.FS)
	for _, want := range []string{"999", fmt.Sprintf("up to %d", len(known))} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to contain %q", err, want)
		}
	}
}

func TestMigrationFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	good := fstest.MapFS{"0001_one.sql": {Data: []byte(`CREATE TABLE one (x INTEGER);`)}}
	bad := fstest.MapFS{
		"0001_one.sql": good["0001_one.sql"],
		"0002_two.sql": {Data: []byte(`CREATE TABLE two (x INTEGER); INSERT INTO one VALUES (1); THIS IS NOT SQL;`)},
	}
	if _, err := open(ctx, path, zerolog.Nop(), bad); err == nil || !strings.Contains(err.Error(), "0002_two.sql") {
		t.Fatalf("open with a broken migration = %v; want an error naming 0002_two.sql", err)
	}
	db, err := open(ctx, path, zerolog.Nop(), good)
	if err != nil {
		t.Fatalf("open with the good migration: %v", err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(ctx); v != 1 {
		t.Errorf("schema version %d; want 1", v)
	}
	if n := count(t, db, "one", ""); n != 0 {
		t.Errorf("table one has %d rows; want 0 (the failed migration's insert rolled back)", n)
	}
	if n := count(t, db, "sqlite_master", "name = 'two'"); n != 0 {
		t.Errorf("table two exists; want it rolled back")
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"gap", fstest.MapFS{"0001_a.sql": {}, "0003_c.sql": {}}, "want version 0002"},
		{"bad name", fstest.MapFS{"0001_a.sql": {}, "2_b.sql": {}}, "2_b.sql"},
		{"duplicate", fstest.MapFS{"0001_a.sql": {}, "0001_b.sql": {}}, "want version 0002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadMigrations(tt.fsys)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadMigrations = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestTxRollsBack(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	errBoom := errors.New("boom")
	err := db.Tx(ctx, func(tx *Tx) error {
		if err := tx.Sessions.SetCursor(ctx, "main", 7); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Tx = %v; want the function's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("Tx swallowed a panic; want it re-raised")
			}
		}()
		_ = db.Tx(ctx, func(tx *Tx) error {
			if err := tx.Sessions.SetCursor(ctx, "main", 8); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if got, _ := db.Sessions.Cursor(ctx, "main"); got != 0 {
		t.Errorf("cursor after two rolled back transactions = %d; want 0", got)
	}
	// The writer connection is usable again.
	if err := db.Sessions.SetCursor(ctx, "main", 9); err != nil {
		t.Fatalf("SetCursor after rollback: %v", err)
	}
}

// Eight writers (four on each of two handles, as two processes would be)
// insert 100 messages each: every insert succeeds.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	a := openAt(t, path)
	b := openAt(t, path)
	addGroup(t, a, "local:main", "main")

	const writers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		db := a
		if w%2 == 1 {
			db = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, inserted, err := db.Messages.Insert(ctx, Message{
					Chat: "local:main", ExternalID: fmt.Sprintf("w%d-%d", w, i), Sender: "alice", Text: "hi",
				})
				if err != nil {
					errs <- err
					continue
				}
				if !inserted {
					errs <- fmt.Errorf("w%d-%d not inserted", w, i)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent insert: %v", err)
	}
	if n := count(t, a, "messages", ""); n != writers*each {
		t.Errorf("%d messages stored; want %d", n, writers*each)
	}
}

// A database from before the run log showed claims keeps its runs, and
// takes running rows afterwards.
func TestMigrateTaskRunsKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridged.db")
	old := fstest.MapFS{}
	for _, n := range []string{"0001_init.sql", "0002_message_mentioned.sql"} {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		old[n] = &fstest.MapFile{Data: b}
	}
	db, err := open(ctx, path, zerolog.Nop(), old)
	if err != nil {
		t.Fatal(err)
	}
	// The schema of that time: the columns later migrations added are absent.
	task := Task{ID: "task-000000000001"}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO tasks (id, folder, chat, prompt, kind, value, created_at)
		VALUES (?, 'main', 'local:main', 'p', 'cron', 'v', 1)`, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status, result) VALUES (?, 5, 6, 'ok', 'fine')`, task.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openAt(t, path)
	runs, err := db.Tasks.Runs(ctx, task.ID, 0)
	if err != nil || len(runs) != 1 || runs[0].Result != "fine" || runs[0].Duration != 6*time.Millisecond {
		t.Fatalf("runs after migrating = %+v, %v; want the old run", runs, err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status) VALUES (?, 7, 0, 'running')`, task.ID); err != nil {
		t.Fatalf("insert a running row: %v", err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO task_runs (task_id, started_at, duration_ms, status) VALUES (?, 8, 0, 'running')`, task.ID); err == nil {
		t.Error("a second running row of the task was accepted; want at most one")
	}
	if err := db.Tasks.Delete(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "task_runs", ""); n != 2 {
		t.Errorf("%d runs after deleting the task; want 2 (a cancelled task keeps its run log)", n)
	}
}

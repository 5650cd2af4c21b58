package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/migrations"
)

// Scale is the size of a seeded store (Seeded).
type Scale struct {
	// Messages is how many messages the store holds, over a year, in the
	// chats of the first Chats groups; BigReplies of them are bridged's
	// replies in the first group's chat (as many again are the messages
	// they answer there).
	Messages, Chats, BigReplies int
	// Groups is how many groups are registered ("g0000", … in chats
	// "local:g0000", …).
	Groups int
}

// Large is the scale of issue 36: a million messages, a hundred thousand
// replies in one chat, a thousand groups.
var Large = Scale{Messages: 1_000_000, Chats: 100, BigReplies: 100_000, Groups: 1000}

// Span is the time the seeded messages spread over, ending now.
const Span = 365 * 24 * time.Hour

// Folder is the folder of seeded group i; Chat its chat.
func Folder(i int) store.Folder { return store.Folder(fmt.Sprintf("g%04d", i)) }

// Chat is the chat of seeded group i.
func Chat(i int) store.ChatID { return store.ChatID("local:" + string(Folder(i))) }

// Seeded returns the path of a fresh copy of a store seeded to s, made under
// dir. The seeded store is built once per scale and schema and kept in the
// system's temporary directory, so later runs copy it instead of seeding
// again. Every reply has its outbox row (sent), the turn end that sent it
// and a usage ledger row; every group with history has its cursor at its
// chat's last message, so all of it is old enough to prune.
func Seeded(tb testing.TB, dir string, s Scale) string {
	tb.Helper()
	n, err := migrationCount()
	if err != nil {
		tb.Fatal(err)
	}
	cache := filepath.Join(os.TempDir(), fmt.Sprintf("bridged-seeded-m%d-c%d-r%d-g%d-v%d.db", s.Messages, s.Chats, s.BigReplies, s.Groups, n))
	if _, err := os.Stat(cache); err != nil {
		tmp := cache + fmt.Sprintf(".%d.tmp", os.Getpid())
		start := time.Now()
		if err := seed(tmp, s); err != nil {
			_ = os.Remove(tmp)
			tb.Fatalf("seed %s: %v", tmp, err)
		}
		if err := os.Rename(tmp, cache); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("seeded %d messages and %d groups in %s (kept at %s)", s.Messages, s.Groups, time.Since(start).Round(time.Millisecond), cache)
	}
	path := filepath.Join(dir, "store", "bridged.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := copyFile(cache, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

func migrationCount() (int, error) {
	names, err := fsGlob()
	return len(names), err
}

func fsGlob() ([]string, error) {
	var out []string
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".sql" {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// seed writes a store seeded to s at path: the groups through the store,
// the history in one transaction of prepared inserts.
func seed(path string, s Scale) error {
	ctx := context.Background()
	db, err := store.Open(ctx, path, zerolog.Nop())
	if err != nil {
		return err
	}
	for i := range s.Groups {
		if _, err := db.Groups.Add(ctx, store.Group{Chat: Chat(i), Folder: Folder(i), Name: string(Folder(i)), Trigger: "@Andy", RequiresTrigger: i != 0, IsMain: i == 0}); err != nil {
			db.Close()
			return err
		}
	}
	if err := db.Close(); err != nil {
		return err
	}
	// No journal, a large cache, and the history's indexes dropped during
	// the inserts and built again after them (a sorted build, many times
	// faster than keeping them up row by row).
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)&_pragma=cache_size(-200000)")
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	var indexes []string
	rows, err := raw.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
		AND tbl_name IN ('messages', 'outbox', 'turn_ends', 'api_usage')`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			rows.Close()
			return err
		}
		names, indexes = append(names, name), append(indexes, def)
	}
	rows.Close()
	for _, n := range names {
		if _, err := raw.ExecContext(ctx, `DROP INDEX `+n); err != nil {
			return err
		}
	}
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = tx.PrepareContext(ctx, q)
		return st
	}
	chat := prep(`INSERT INTO chats (id, name, channel, is_group, last_activity) VALUES (?, ?, 'local', 1, ?)
		ON CONFLICT (id) DO UPDATE SET last_activity = excluded.last_activity`)
	msg := prep(`INSERT INTO messages (chat, external_id, sender, sender_name, text, sent_at, from_me, is_bot, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	out := prep(`INSERT INTO outbox (chat, folder, text, origin, state, external_id, sent_id, created_at, sent_at)
		VALUES (?, ?, ?, 'reply', 'sent', ?, ?, ?, ?)`)
	end := prep(`INSERT INTO turn_ends (chat, upto, result, reason, attempt, attempts, at) VALUES (?, ?, 'done', '', 1, 1, ?)`)
	usage := prep(`INSERT INTO api_usage (folder, at, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd)
		VALUES (?, ?, 'claude-sonnet-4-5', 3000, 400, 0, 2500, 0.012)`)
	cursor := prep(`INSERT INTO cursors (folder, message_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET message_id = excluded.message_id`)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	first := now - Span.Milliseconds()
	chats := max(s.Chats, 1)
	// The first chat's messages (each reply and what it answers) are
	// spread evenly among the others'.
	stride, bigN := 0, 0
	if s.BigReplies > 0 {
		stride = max(s.Messages/(2*s.BigReplies), 1)
	}
	last := make([]int64, chats)
	lastIn := make([]int64, chats)
	for i := range s.Messages {
		at := first + int64(i)*Span.Milliseconds()/int64(max(s.Messages, 1))
		var c int
		var reply bool
		switch {
		case stride > 0 && i%stride == 0 && bigN < 2*s.BigReplies:
			reply = bigN%2 == 1
			bigN++
		case chats > 1:
			c = 1 + i%(chats-1)
			reply = i%4 == 3
		default:
			reply = i%4 == 3
		}
		ch := Chat(c)
		ext := fmt.Sprintf("e%07d", i)
		text := fmt.Sprintf("message %d of the seeded history, long enough to look like a line of chat", i)
		sender, name, fromMe, isBot := "491700000"+fmt.Sprint(c), "Member", 0, 0
		if reply {
			sender, name, fromMe, isBot = "", "", 1, 1
			ext = store.NewExternalID()
			if _, err := out.ExecContext(ctx, ch, Folder(c), text, ext, ext, at, at); err != nil {
				return err
			}
		}
		res, err := msg.ExecContext(ctx, ch, ext, sender, name, text, at, fromMe, isBot, at)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		last[c] = id
		if reply {
			if _, err := end.ExecContext(ctx, ch, lastIn[c], at); err != nil {
				return err
			}
			if _, err := usage.ExecContext(ctx, Folder(c), at); err != nil {
				return err
			}
		} else {
			lastIn[c] = id
		}
	}
	for c := range chats {
		if last[c] == 0 {
			continue
		}
		if _, err := chat.ExecContext(ctx, Chat(c), string(Folder(c)), now); err != nil {
			return err
		}
		if _, err := cursor.ExecContext(ctx, Folder(c), last[c], now); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, def := range indexes {
		if _, err := raw.ExecContext(ctx, def); err != nil {
			return err
		}
	}
	_, err = raw.ExecContext(ctx, `PRAGMA journal_mode = WAL`)
	return err
}

// ScaleFromEnv is Large, or with BRIDGED_SCALE_MESSAGES set to a number
// that many messages (a tenth of them replies in one chat) for a quicker
// run; the groups stay a thousand.
func ScaleFromEnv(tb testing.TB) Scale {
	tb.Helper()
	v := os.Getenv("BRIDGED_SCALE_MESSAGES")
	if v == "" {
		return Large
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n < 1000 {
		tb.Fatalf("BRIDGED_SCALE_MESSAGES=%q: want a number of messages, 1000 or more", v)
	}
	s := Large
	s.Messages, s.BigReplies = n, n/10
	return s
}

// Empty is the store the scale benchmarks compare against: no history, ten
// groups.
var Empty = Scale{Chats: 1, Groups: 10}

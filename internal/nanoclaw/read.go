// Package nanoclaw reads a NanoClaw v1 install (up to v1.2.39) and plans and
// applies its import into bridged (`bridged import nanoclaw`): the
// registered groups, their folders and the global memory, the scheduled
// tasks, the sender and mount allow lists, the message history and each
// group's Claude session. The source is only read: its SQLite database is
// opened read-only and its files are never written.
package nanoclaw

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database driver
)

// Version is the newest NanoClaw release whose schema the import knows.
const Version = "v1.2.39"

// Error classes, checked with errors.Is.
var (
	ErrNotNanoClaw = errors.New("not a NanoClaw v1 directory")
	ErrSchemaNewer = errors.New("NanoClaw database newer than " + Version)
	ErrLocked      = errors.New("NanoClaw database is locked")
)

// schema is every table and column of NanoClaw v1.2.39's store/messages.db
// (src/db.ts). Older installs lack some columns (added by its migrations);
// any table or column not listed here is a newer schema.
var schema = map[string][]string{
	"chats":             {"jid", "name", "last_message_time", "channel", "is_group"},
	"messages":          {"id", "chat_jid", "sender", "sender_name", "content", "timestamp", "is_from_me", "is_bot_message"},
	"scheduled_tasks":   {"id", "group_folder", "chat_jid", "prompt", "schedule_type", "schedule_value", "next_run", "last_run", "last_result", "status", "created_at", "context_mode", "script"},
	"task_run_logs":     {"id", "task_id", "run_at", "duration_ms", "status", "result", "error"},
	"router_state":      {"key", "value"},
	"sessions":          {"group_folder", "session_id"},
	"registered_groups": {"jid", "name", "folder", "trigger_pattern", "added_at", "container_config", "requires_trigger", "is_main"},
	"sqlite_sequence":   {"name", "seq"},
}

// Install is what a NanoClaw install holds, as read.
type Install struct {
	Dir       string // the project directory (its store/, groups/, data/)
	ConfigDir string // ~/.config/nanoclaw of the user who ran it
	Groups    []Group
	Tasks     []Task
	TaskRuns  int // rows of task_run_logs
	Chats     map[string]Chat
	Messages  []Message // oldest first
	Sessions  map[string]string
	// AgentSeen is router_state's last_agent_timestamp: per chat, the
	// time of the last message handed to its agent.
	AgentSeen  map[string]time.Time
	Senders    *SenderAllowlist // nil: no sender-allowlist.json
	SendersErr error            // the file is there but malformed
	Mounts     *MountAllowlist  // nil: no mount-allowlist.json
	MountsErr  error
}

// Group is a registered_groups row.
type Group struct {
	JID, Name, Folder, Trigger string
	AddedAt                    time.Time
	RequiresTrigger, IsMain    bool
	Mounts                     []Mount
	TimeoutMS                  int64
	ConfigErr                  error // container_config is not valid JSON
}

// Mount is one of containerConfig.additionalMounts.
type Mount struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath,omitempty"`
	Readonly      *bool  `json:"readonly,omitempty"`
}

// Task is a scheduled_tasks row.
type Task struct {
	ID, Folder, JID, Prompt, Type, Value string
	NextRun, LastRun                     *time.Time
	LastResult, Status, ContextMode      string
	Script                               string
	CreatedAt                            time.Time
}

// Chat is a chats row.
type Chat struct {
	JID, Name, Channel string
	IsGroup            bool
	Last               time.Time
}

// Message is a messages row.
type Message struct {
	ID, JID, Sender, SenderName, Content string
	At                                   time.Time
	FromMe, IsBot                        bool
}

// SenderAllowlist is sender-allowlist.json (src/sender-allowlist.ts).
type SenderAllowlist struct {
	Default *SenderEntry
	Chats   map[string]SenderEntry
	// Bad lists the chat entries that are not valid, which NanoClaw
	// skipped.
	Bad []string
}

// SenderEntry is one chat's (or the default) sender rule: allow is "*" or
// a list of sender ids; mode is "trigger" or "drop".
type SenderEntry struct {
	All   bool
	Allow []string
	Mode  string
}

// MountAllowlist is mount-allowlist.json (src/mount-security.ts), the shape
// bridged's own allowlist file has.
type MountAllowlist struct {
	AllowedRoots []struct {
		Path           string `json:"path"`
		AllowReadWrite bool   `json:"allowReadWrite"`
		Description    string `json:"description,omitempty"`
	} `json:"allowedRoots"`
	BlockedPatterns []string `json:"blockedPatterns"`
	NonMainReadOnly *bool    `json:"nonMainReadOnly"`
}

// DBPath is the NanoClaw database under dir.
func DBPath(dir string) string { return filepath.Join(dir, "store", "messages.db") }

// Read reads the install at dir, with its allow lists in configDir. It
// refuses, writing nothing, a directory that is not a NanoClaw v1 install
// (ErrNotNanoClaw), a database of a newer schema (ErrSchemaNewer) and a
// database another process holds locked (ErrLocked).
func Read(ctx context.Context, dir, configDir string) (*Install, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	in := &Install{Dir: abs, ConfigDir: configDir, Chats: map[string]Chat{}, Sessions: map[string]string{}, AgentSeen: map[string]time.Time{}}
	dbPath := DBPath(abs)
	fi, err := os.Lstat(dbPath)
	switch {
	case err != nil && exists(filepath.Join(abs, "data", "v2.db")):
		return nil, fmt.Errorf("%w: %s is a NanoClaw v2 install (data/v2.db); bridged imports NanoClaw v1 (up to %s)", ErrSchemaNewer, abs, Version)
	case err != nil:
		return nil, fmt.Errorf("%w: %s has no store/messages.db (give the directory NanoClaw ran in, the one holding store/, groups/ and data/)", ErrNotNanoClaw, abs)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotNanoClaw, dbPath)
	}
	if err := in.readDB(ctx, dbPath); err != nil {
		return nil, err
	}
	in.Senders, in.SendersErr = readSenders(filepath.Join(configDir, "sender-allowlist.json"))
	in.Mounts, in.MountsErr = readMounts(filepath.Join(configDir, "mount-allowlist.json"))
	return in, nil
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// readDB reads the database in one read transaction, read-only.
func (in *Install) readDB(ctx context.Context, path string) error {
	wal, err := walMode(path)
	if err != nil {
		return err
	}
	for _, side := range []string{"-wal", "-shm", "-journal"} {
		if exists(path + side) {
			return fmt.Errorf("%w: %s is there, so a process (NanoClaw?) has the database open or it was not closed cleanly; stop NanoClaw (or start and stop it once) and run the import again", ErrLocked, path+side)
		}
	}
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	// A WAL database would get its -wal and -shm files made even read-only;
	// with none there nobody has it open, so it is read as immutable. A
	// rollback-journal database is read-only under SQLite's locks.
	opts := "?mode=ro&_pragma=busy_timeout(2000)&_pragma=query_only(1)"
	if wal {
		opts = "?mode=ro&immutable=1&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", "file:"+p+opts)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify(path, err)
	}
	defer func() { _ = tx.Rollback() }()
	cols, err := in.checkSchema(ctx, tx)
	if err != nil {
		return classify(path, err)
	}
	for _, step := range []func(context.Context, *sql.Tx, map[string]map[string]bool) error{
		in.readGroups, in.readTasks, in.readChats, in.readMessages, in.readSessions, in.readRouter,
	} {
		if err := step(ctx, tx, cols); err != nil {
			return classify(path, err)
		}
	}
	return nil
}

// walMode reads the database header: whether it is in WAL mode.
func walMode(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nofollow, 0)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrNotNanoClaw, err)
	}
	defer f.Close()
	var h [100]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || string(h[:16]) != "SQLite format 3\x00" {
		return false, fmt.Errorf("%w: %s is not a SQLite database", ErrNotNanoClaw, path)
	}
	return h[18] == 2 && h[19] == 2, nil
}

// classify turns SQLite's busy and locked errors into ErrLocked.
func classify(path string, err error) error {
	var coded interface{ Code() int }
	if errors.As(err, &coded) && (coded.Code()&0xff == 5 || coded.Code()&0xff == 6) {
		return fmt.Errorf("%w: %s: another process (NanoClaw still running?) holds it; stop NanoClaw and run the import again", ErrLocked, path)
	}
	if errors.Is(err, ErrSchemaNewer) || errors.Is(err, ErrNotNanoClaw) {
		return err
	}
	if s := err.Error(); strings.Contains(s, "file is not a database") {
		return fmt.Errorf("%w: %s is not a SQLite database", ErrNotNanoClaw, path)
	}
	return fmt.Errorf("read %s: %w", path, err)
}

// checkSchema returns the columns of each known table, refusing unknown
// tables and columns.
func (in *Install) checkSchema(ctx context.Context, tx *sql.Tx) (map[string]map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !slices.Contains(tables, "registered_groups") {
		return nil, fmt.Errorf("%w: its database has no registered_groups table", ErrNotNanoClaw)
	}
	cols := map[string]map[string]bool{}
	var newer []string
	for _, t := range tables {
		known, ok := schema[t]
		if !ok {
			newer = append(newer, "table "+t)
			continue
		}
		cols[t] = map[string]bool{}
		crows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, t)
		if err != nil {
			return nil, err
		}
		for crows.Next() {
			var c string
			if err := crows.Scan(&c); err != nil {
				crows.Close()
				return nil, err
			}
			cols[t][c] = true
			if !slices.Contains(known, c) {
				newer = append(newer, "column "+t+"."+c)
			}
		}
		crows.Close()
		if err := crows.Err(); err != nil {
			return nil, err
		}
	}
	if len(newer) > 0 {
		return nil, fmt.Errorf("%w: it has %s, which %s does not; nothing was imported", ErrSchemaNewer, strings.Join(newer, ", "), Version)
	}
	return cols, nil
}

// col selects column c of table t, or def when an older schema lacks it.
func col(cols map[string]map[string]bool, t, c, def string) string {
	if cols[t][c] {
		return "COALESCE(" + c + ", " + def + ")"
	}
	return def
}

func (in *Install) readGroups(ctx context.Context, tx *sql.Tx, cols map[string]map[string]bool) error {
	isMain := col(cols, "registered_groups", "is_main", "CASE WHEN folder = 'main' THEN 1 ELSE 0 END")
	rows, err := tx.QueryContext(ctx, `SELECT jid, name, folder, trigger_pattern, added_at, `+col(cols, "registered_groups", "container_config", "''")+`, `+
		col(cols, "registered_groups", "requires_trigger", "1")+`, `+isMain+` FROM registered_groups ORDER BY added_at, jid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var g Group
		var added, cfg string
		if err := rows.Scan(&g.JID, &g.Name, &g.Folder, &g.Trigger, &added, &cfg, &g.RequiresTrigger, &g.IsMain); err != nil {
			return err
		}
		g.AddedAt = parseTime(added)
		if strings.TrimSpace(cfg) != "" {
			var c struct {
				AdditionalMounts []Mount `json:"additionalMounts"`
				Timeout          int64   `json:"timeout"`
			}
			if err := json.Unmarshal([]byte(cfg), &c); err != nil {
				g.ConfigErr = err
			}
			g.Mounts, g.TimeoutMS = c.AdditionalMounts, c.Timeout
		}
		in.Groups = append(in.Groups, g)
	}
	return rows.Err()
}

func (in *Install) readTasks(ctx context.Context, tx *sql.Tx, cols map[string]map[string]bool) error {
	if cols["scheduled_tasks"] == nil {
		return nil
	}
	t := func(c, def string) string { return col(cols, "scheduled_tasks", c, def) }
	rows, err := tx.QueryContext(ctx, `SELECT id, group_folder, chat_jid, prompt, schedule_type, schedule_value, `+t("next_run", "''")+`, `+t("last_run", "''")+`, `+
		t("last_result", "''")+`, `+t("status", "'active'")+`, created_at, `+t("context_mode", "'isolated'")+`, `+t("script", "''")+` FROM scheduled_tasks ORDER BY created_at, id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k Task
		var next, last, created string
		if err := rows.Scan(&k.ID, &k.Folder, &k.JID, &k.Prompt, &k.Type, &k.Value, &next, &last, &k.LastResult, &k.Status, &created, &k.ContextMode, &k.Script); err != nil {
			return err
		}
		k.NextRun, k.LastRun, k.CreatedAt = optTime(next), optTime(last), parseTime(created)
		in.Tasks = append(in.Tasks, k)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if cols["task_run_logs"] != nil {
		return tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_run_logs`).Scan(&in.TaskRuns)
	}
	return nil
}

func (in *Install) readChats(ctx context.Context, tx *sql.Tx, cols map[string]map[string]bool) error {
	if cols["chats"] == nil {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT jid, COALESCE(name, ''), COALESCE(last_message_time, ''), `+col(cols, "chats", "channel", "''")+`, `+col(cols, "chats", "is_group", "0")+` FROM chats`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c Chat
		var last string
		if err := rows.Scan(&c.JID, &c.Name, &last, &c.Channel, &c.IsGroup); err != nil {
			return err
		}
		c.Last = parseTime(last)
		in.Chats[c.JID] = c
	}
	return rows.Err()
}

func (in *Install) readMessages(ctx context.Context, tx *sql.Tx, cols map[string]map[string]bool) error {
	if cols["messages"] == nil {
		return nil
	}
	m := func(c, def string) string { return col(cols, "messages", c, def) }
	rows, err := tx.QueryContext(ctx, `SELECT COALESCE(id, ''), COALESCE(chat_jid, ''), `+m("sender", "''")+`, `+m("sender_name", "''")+`, `+m("content", "''")+`, `+
		m("timestamp", "''")+`, `+m("is_from_me", "0")+`, `+m("is_bot_message", "0")+` FROM messages ORDER BY timestamp, rowid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var x Message
		var at string
		if err := rows.Scan(&x.ID, &x.JID, &x.Sender, &x.SenderName, &x.Content, &at, &x.FromMe, &x.IsBot); err != nil {
			return err
		}
		x.At = parseTime(at)
		in.Messages = append(in.Messages, x)
	}
	return rows.Err()
}

func (in *Install) readSessions(ctx context.Context, tx *sql.Tx, cols map[string]map[string]bool) error {
	if cols["sessions"] == nil {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT group_folder, session_id FROM sessions`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var f, s string
		if err := rows.Scan(&f, &s); err != nil {
			return err
		}
		in.Sessions[f] = s
	}
	return rows.Err()
}

func (in *Install) readRouter(ctx context.Context, tx *sql.Tx, cols map[string]map[string]bool) error {
	if cols["router_state"] == nil {
		return nil
	}
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM router_state WHERE key = 'last_agent_timestamp'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var m map[string]string
	if json.Unmarshal([]byte(v), &m) != nil {
		return nil // NanoClaw itself starts over from an unreadable cursor
	}
	for jid, ts := range m {
		if t := parseTime(ts); !t.IsZero() {
			in.AgentSeen[jid] = t
		}
	}
	return nil
}

// parseTime reads NanoClaw's ISO 8601 times; the zero time when empty or
// unreadable.
func parseTime(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, l := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

func optTime(s string) *time.Time {
	t := parseTime(s)
	if t.IsZero() {
		return nil
	}
	return &t
}

// readSenders reads sender-allowlist.json as NanoClaw does, but a file
// NanoClaw would have ignored as invalid is an error here, to be listed.
func readSenders(path string) (*SenderAllowlist, error) {
	data, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var raw struct {
		Default json.RawMessage            `json:"default"`
		Chats   map[string]json.RawMessage `json:"chats"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", path, err)
	}
	def, ok := senderEntry(raw.Default)
	if !ok {
		return nil, fmt.Errorf("%s: invalid or missing default entry (want {\"allow\": \"*\" or [ids], \"mode\": \"trigger\" or \"drop\"})", path)
	}
	out := &SenderAllowlist{Default: &def, Chats: map[string]SenderEntry{}}
	keys := make([]string, 0, len(raw.Chats))
	for k := range raw.Chats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, jid := range keys {
		if e, ok := senderEntry(raw.Chats[jid]); ok {
			out.Chats[jid] = e
		} else {
			out.Bad = append(out.Bad, jid)
		}
	}
	return out, nil
}

func senderEntry(b json.RawMessage) (SenderEntry, bool) {
	var e struct {
		Allow json.RawMessage `json:"allow"`
		Mode  string          `json:"mode"`
	}
	if len(b) == 0 || json.Unmarshal(b, &e) != nil || (e.Mode != "trigger" && e.Mode != "drop") {
		return SenderEntry{}, false
	}
	var star string
	if json.Unmarshal(e.Allow, &star) == nil {
		return SenderEntry{All: true, Mode: e.Mode}, star == "*"
	}
	var list []string
	if json.Unmarshal(e.Allow, &list) != nil {
		return SenderEntry{}, false
	}
	return SenderEntry{Allow: list, Mode: e.Mode}, true
}

func readMounts(path string) (*MountAllowlist, error) {
	data, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m MountAllowlist
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", path, err)
	}
	if m.AllowedRoots == nil || m.BlockedPatterns == nil || m.NonMainReadOnly == nil {
		return nil, fmt.Errorf("%s: want allowedRoots, blockedPatterns and nonMainReadOnly", path)
	}
	return &m, nil
}

// readSmall reads a regular configuration file (not through a link), at
// most 1 MiB.
func readSmall(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() > 1<<20 {
		return nil, fmt.Errorf("%s: larger than 1 MiB", path)
	}
	return os.ReadFile(path)
}

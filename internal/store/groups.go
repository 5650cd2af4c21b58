package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Group is a registered chat: it has an agent, a folder and a trigger.
type Group struct {
	Chat            ChatID
	Name            string // display name; the folder when empty
	Folder          Folder
	Trigger         string // e.g. "@Andy"
	RequiresTrigger bool   // false: every message wakes the agent
	IsMain          bool   // the one admin group
	ContainerConfig ContainerConfig
	// Allow lists who may wake the agent besides the owner: sender ids
	// (see NormalizeSender) and AllowAdmins; empty: everyone.
	Allow []string
	// Others is what becomes of a message from a sender Allow does not
	// admit: OthersContext (the default) or OthersDrop.
	Others string
	// Tools is the group's tool profile (see ToolProfile); empty is taken
	// as ToolsFull.
	Tools ToolProfile
	// Sees is which other groups' folders the main group's agent sees
	// (main only; every other group sees none).
	Sees      Sees
	CreatedAt time.Time // set by Groups.Add
}

// ToolProfile says what a group's agent may do without the owner.
type ToolProfile string

// The tool profiles (README "Permissions").
const (
	ToolsFull     ToolProfile = "full"
	ToolsAsk      ToolProfile = "ask"
	ToolsReadOnly ToolProfile = "read-only"
	ToolsChat     ToolProfile = "chat"
)

// Valid reports whether p is a known profile.
func (p ToolProfile) Valid() bool {
	switch p {
	case ToolsFull, ToolsAsk, ToolsReadOnly, ToolsChat:
		return true
	}
	return false
}

// What becomes of a message from a sender the allow list does not admit.
const (
	OthersContext = "context" // stored and shown to the agent; wakes nothing
	OthersDrop    = "drop"    // not stored
)

// AllowAdmins in a group's allow list admits the chat's admins (on
// WhatsApp, the group's admins as its metadata says).
const AllowAdmins = "admins"

// ContainerConfig holds a group's own container settings.
type ContainerConfig struct {
	ExtraMounts []MountRequest
	Timeout     time.Duration // 0: the daemon's default
	Model       string        // empty: the CLI's default
	// BudgetDailyUSD is the most the group's agent may cost in one day
	// (the configured timezone's day); 0: no budget.
	BudgetDailyUSD float64
}

// MountRequest asks for an extra host directory in the group's container.
// The mount allowlist decides whether it is granted.
type MountRequest struct {
	HostPath      string `json:"host_path"`
	ContainerPath string `json:"container_path"` // name under /workspace/extra
	ReadWrite     bool   `json:"read_write,omitempty"`
}

type containerConfigJSON struct {
	ExtraMounts []MountRequest `json:"extra_mounts,omitempty"`
	Timeout     string         `json:"timeout,omitempty"` // Go duration
	Model       string         `json:"model,omitempty"`
	BudgetUSD   float64        `json:"budget_daily_usd,omitempty"`
}

// MarshalJSON encodes c with the timeout as a Go duration ("45m").
func (c ContainerConfig) MarshalJSON() ([]byte, error) {
	j := containerConfigJSON{ExtraMounts: c.ExtraMounts, Model: c.Model, BudgetUSD: c.BudgetDailyUSD}
	if c.Timeout != 0 {
		j.Timeout = c.Timeout.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON writes; unknown fields are
// rejected.
func (c *ContainerConfig) UnmarshalJSON(b []byte) error {
	var j containerConfigJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("container config: %w", err)
	}
	var d time.Duration
	if j.Timeout != "" {
		var err error
		if d, err = time.ParseDuration(j.Timeout); err != nil || d < 0 {
			return fmt.Errorf("container config: invalid timeout %q: want a Go duration such as 45m", j.Timeout)
		}
	}
	if j.BudgetUSD < 0 || math.IsNaN(j.BudgetUSD) || math.IsInf(j.BudgetUSD, 0) {
		return fmt.Errorf("container config: invalid daily budget %v", j.BudgetUSD)
	}
	*c = ContainerConfig{ExtraMounts: j.ExtraMounts, Timeout: d, Model: j.Model, BudgetDailyUSD: j.BudgetUSD}
	return nil
}

const groupColumns = `chat, name, folder, trigger_word, requires_trigger, is_main, container_config, created_at, allow_senders, others, tools, sees`

func scanGroup(row rowScanner) (Group, error) {
	var g Group
	var cfg, allow, sees string
	var created int64
	if err := row.Scan(&g.Chat, &g.Name, &g.Folder, &g.Trigger, &g.RequiresTrigger, &g.IsMain, &cfg, &created, &allow, &g.Others, &g.Tools, &sees); err != nil {
		return Group{}, err
	}
	var err error
	if g.Sees, err = scanSees(sees); err != nil {
		return Group{}, fmt.Errorf("group %s: %w", g.Folder, err)
	}
	g.CreatedAt = fromMS(created)
	if err := json.Unmarshal([]byte(cfg), &g.ContainerConfig); err != nil {
		return Group{}, fmt.Errorf("group %s: %w", g.Folder, err)
	}
	if err := json.Unmarshal([]byte(allow), &g.Allow); err != nil {
		return Group{}, fmt.Errorf("group %s: allowed senders: %w", g.Folder, err)
	}
	if len(g.Allow) == 0 {
		g.Allow = nil
	}
	return g, nil
}

// allowJSON is how a group's allow list is stored.
func allowJSON(allow []string) string {
	if len(allow) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(allow)
	return string(b)
}

func (g *Group) check() error {
	if err := ValidateFolder(string(g.Folder)); err != nil {
		return err
	}
	if g.Chat == "" {
		return fmt.Errorf("%w: group %s has no chat id", ErrInvalid, g.Folder)
	}
	if g.Name == "" {
		g.Name = string(g.Folder)
	}
	if g.Tools == "" {
		g.Tools = ToolsFull
	}
	if !g.Tools.Valid() {
		return fmt.Errorf("%w: group %s: unknown tool profile %q", ErrInvalid, g.Folder, g.Tools)
	}
	if g.ContainerConfig.Timeout < 0 {
		return fmt.Errorf("%w: group %s: negative container timeout", ErrInvalid, g.Folder)
	}
	if b := g.ContainerConfig.BudgetDailyUSD; b < 0 || math.IsNaN(b) || math.IsInf(b, 0) {
		return fmt.Errorf("%w: group %s: daily budget must be a finite amount of at least 0", ErrInvalid, g.Folder)
	}
	switch g.Others {
	case "":
		g.Others = OthersContext
	case OthersContext, OthersDrop:
	default:
		return fmt.Errorf("%w: group %s: others must be %s or %s, not %q", ErrInvalid, g.Folder, OthersContext, OthersDrop, g.Others)
	}
	allow, err := NormalizeAllow(g.Allow)
	if err != nil {
		return fmt.Errorf("%w: group %s: %w", ErrInvalid, g.Folder, err)
	}
	g.Allow = allow
	if !g.IsMain && !g.Sees.None() {
		return fmt.Errorf("%w: group %s: only the main group sees other groups' folders", ErrInvalid, g.Folder)
	}
	for _, f := range g.Sees.Folders {
		if err := ValidateFolder(string(f)); err != nil {
			return fmt.Errorf("%w: group %s: %w", ErrInvalid, g.Folder, err)
		}
		if f == g.Folder {
			return fmt.Errorf("%w: group %s sees its own folder anyway (read-write); name the other groups it sees", ErrInvalid, g.Folder)
		}
	}
	return nil
}

// checkSeen returns ErrInvalid unless every folder g sees is a registered
// group's.
func (q *GroupTx) checkSeen(ctx context.Context, g Group) error {
	for _, f := range g.Sees.Folders {
		if _, err := getGroup(ctx, q.tx.stx, `folder = ?`, f); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: group %s cannot see %q: no group has that folder", ErrInvalid, g.Folder, f)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// conflicts returns an error if another group than self holds g's folder
// (only when checkFolder), chat, or the main flag.
func (q *GroupTx) conflicts(ctx context.Context, g Group, checkFolder bool) error {
	if checkFolder {
		if _, err := getGroup(ctx, q.tx.stx, `folder = ?`, g.Folder); err == nil {
			return fmt.Errorf("%w: group folder %q is taken", ErrExists, g.Folder)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	other, err := getGroup(ctx, q.tx.stx, `chat = ?`, g.Chat)
	switch {
	case err == nil && other.Folder != g.Folder:
		return fmt.Errorf("%w: chat %s is already registered as group %q", ErrExists, g.Chat, other.Folder)
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	if g.IsMain {
		main, err := getGroup(ctx, q.tx.stx, `is_main = 1`)
		switch {
		case err == nil && main.Folder != g.Folder:
			return fmt.Errorf("%w: %q is the main group", ErrMainExists, main.Folder)
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
	}
	return nil
}

// Add registers g and returns it as stored. The folder must pass
// ValidateFolder (ErrInvalidFolder) and neither the folder nor the chat may
// be registered already (ErrExists); only one group may be main
// (ErrMainExists). A group is main only when g.IsMain says so.
func (q *GroupTx) Add(ctx context.Context, g Group) (Group, error) {
	if err := g.check(); err != nil {
		return Group{}, fmt.Errorf("add group: %w", err)
	}
	if err := q.conflicts(ctx, g, true); err != nil {
		return Group{}, fmt.Errorf("add group: %w", err)
	}
	if err := q.checkSeen(ctx, g); err != nil {
		return Group{}, fmt.Errorf("add group: %w", err)
	}
	cfg, err := json.Marshal(g.ContainerConfig)
	if err != nil {
		return Group{}, fmt.Errorf("add group %s: %w", g.Folder, err)
	}
	g.CreatedAt = fromMS(toMS(q.tx.now()))
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO registered_groups (`+groupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		g.Chat, g.Name, g.Folder, g.Trigger, boolInt(g.RequiresTrigger), boolInt(g.IsMain), string(cfg), toMS(g.CreatedAt), allowJSON(g.Allow), g.Others, g.Tools, seesSQL(g.Sees)); err != nil {
		return Group{}, fmt.Errorf("add group %s: %w", g.Folder, err)
	}
	if _, err := q.tx.stx.ExecContext(ctx, `INSERT INTO chats (id, name) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, g.Chat, g.Name); err != nil {
		return Group{}, fmt.Errorf("add group %s: record chat: %w", g.Folder, err)
	}
	// Rules left by a group of the same folder removed before were given
	// to that group, not to this one.
	if _, err := q.tx.Approvals.DropRules(ctx, g.Folder); err != nil {
		return Group{}, fmt.Errorf("add group %s: %w", g.Folder, err)
	}
	q.tx.groupsChanged = true
	return g, nil
}

// Add registers g (see GroupTx.Add).
func (q *GroupQuery) Add(ctx context.Context, g Group) (Group, error) {
	return txValue(ctx, q.db, func(tx *Tx) (Group, error) { return tx.Groups.Add(ctx, g) })
}

// Update replaces the settings of the group with g.Folder (everything
// but the folder and CreatedAt). Errors: ErrNotFound, ErrExists (the chat
// belongs to another group), ErrMainExists.
func (q *GroupTx) Update(ctx context.Context, g Group) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("update group: %w", err)
	}
	if err := q.conflicts(ctx, g, false); err != nil {
		return fmt.Errorf("update group: %w", err)
	}
	if err := q.checkSeen(ctx, g); err != nil {
		return fmt.Errorf("update group: %w", err)
	}
	cfg, err := json.Marshal(g.ContainerConfig)
	if err != nil {
		return fmt.Errorf("update group %s: %w", g.Folder, err)
	}
	// The standing rules of "always allow" answers were given for the
	// profile that asked: a change of profile drops them, in this
	// transaction.
	var was ToolProfile
	if err := q.tx.stx.QueryRowContext(ctx, `SELECT tools FROM registered_groups WHERE folder = ?`, g.Folder).Scan(&was); err == nil && cmp.Or(was, ToolsFull) != g.Tools {
		if _, err := q.tx.Approvals.DropRules(ctx, g.Folder); err != nil {
			return fmt.Errorf("update group %s: %w", g.Folder, err)
		}
	}
	res, err := q.tx.stx.ExecContext(ctx, `UPDATE registered_groups SET chat = ?, name = ?, trigger_word = ?, requires_trigger = ?, is_main = ?, container_config = ?,
		allow_senders = ?, others = ?, tools = ?, sees = ? WHERE folder = ?`, g.Chat, g.Name, g.Trigger, boolInt(g.RequiresTrigger), boolInt(g.IsMain), string(cfg), allowJSON(g.Allow), g.Others, g.Tools, seesSQL(g.Sees), g.Folder)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("update group %s: %w", g.Folder, err)
	}
	q.tx.groupsChanged = true
	return nil
}

// Update replaces a group's settings (see GroupTx.Update).
func (q *GroupQuery) Update(ctx context.Context, g Group) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Groups.Update(ctx, g) })
}

// Remove unregisters the group with folder (ErrNotFound if none). Its
// stored messages, session, cursor and tasks stay; new message text from its
// chat is no longer stored. The main group no longer names it among the
// folders it sees, so a group registered later with the same folder is not
// seen unless the owner says so.
func (q *GroupTx) Remove(ctx context.Context, folder Folder) error {
	res, err := q.tx.stx.ExecContext(ctx, `DELETE FROM registered_groups WHERE folder = ?`, folder)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("remove group %s: %w", folder, err)
	}
	main, err := getGroup(ctx, q.tx.stx, `is_main = 1`)
	switch {
	case err == nil && slices.Contains(main.Sees.Folders, folder):
		if _, err := q.tx.stx.ExecContext(ctx, `UPDATE registered_groups SET sees = ? WHERE folder = ?`, seesSQL(main.Sees.Without(folder)), main.Folder); err != nil {
			return fmt.Errorf("remove group %s: %w", folder, err)
		}
	case err != nil && !errors.Is(err, ErrNotFound):
		return fmt.Errorf("remove group %s: %w", folder, err)
	}
	q.tx.groupsChanged = true
	return nil
}

// Remove unregisters a group (see GroupTx.Remove).
func (q *GroupQuery) Remove(ctx context.Context, folder Folder) error {
	return q.db.Tx(ctx, func(tx *Tx) error { return tx.Groups.Remove(ctx, folder) })
}

func getGroup(ctx context.Context, q querier, where string, args ...any) (Group, error) {
	g, err := scanGroup(q.QueryRowContext(ctx, `SELECT `+groupColumns+` FROM registered_groups WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Group{}, ErrNotFound
	}
	return g, err
}

// ByChat returns the group registered for chat, or ErrNotFound.
func (q *GroupTx) ByChat(ctx context.Context, chat ChatID) (Group, error) {
	g, err := getGroup(ctx, q.tx.stx, `chat = ?`, chat)
	if err != nil {
		return Group{}, fmt.Errorf("get group for chat %s: %w", chat, err)
	}
	return g, nil
}

// ByFolder returns the group with folder, or ErrNotFound.
func (q *GroupTx) ByFolder(ctx context.Context, folder Folder) (Group, error) {
	return getGroupByFolder(ctx, q.tx.stx, folder)
}

func getGroupByFolder(ctx context.Context, q querier, folder Folder) (Group, error) {
	g, err := getGroup(ctx, q, `folder = ?`, folder)
	if err != nil {
		return Group{}, fmt.Errorf("get group %s: %w", folder, err)
	}
	return g, nil
}

// oneRow turns an UPDATE/DELETE result that touched no row into ErrNotFound.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

package rules

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bridged-app/bridged/internal/store"
)

// ErrInvalid is wrapped by every rule violation.
var ErrInvalid = errors.New("invalid")

// invalidError is a rule violation: its text is the whole message, and it
// matches ErrInvalid (and what it wraps, if anything).
type invalidError struct {
	msg  string
	wrap error
}

func (e *invalidError) Error() string { return e.msg }

func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func (e *invalidError) Unwrap() error { return e.wrap }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// DefaultAssistantName is the assistant's name when none is configured.
const DefaultAssistantName = "Andy"

// Limits.
const (
	// MaxLocalName is the longest name of a local chat (local:<name>).
	MaxLocalName = 64
	// MaxTrigger is the longest trigger, "@" included, in characters.
	MaxTrigger = 64
	// MaxName is the longest display name of a group, in characters.
	MaxName = 100
	// MinTimeout is the shortest container timeout a group may have.
	MinTimeout = time.Minute
)

// TelegramPrefix starts every Telegram chat id ("tg:<id>").
const TelegramPrefix = "tg:"

// LocalPrefix starts every local chat id ("local:<name>").
const LocalPrefix = "local:"

var (
	localNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	digitsRE    = regexp.MustCompile(`^[0-9]{1,32}$`)
	groupUserRE = regexp.MustCompile(`^[0-9]{1,32}(-[0-9]{1,32})?$`)
)

// hasControl reports whether s holds a control or invisible formatting
// character (a newline, a NUL, a zero-width space, a direction override…).
func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// CheckChat checks a chat id as given (not trimmed): local:<name> with a safe
// name, a WhatsApp id ending in @g.us, @s.whatsapp.net or @lid, or a
// Telegram chat tg:<id> (a non-zero integer, negative for groups).
func CheckChat(chat string) error {
	want := "want local:<name>, a WhatsApp id such as 120363…@g.us, 49151…@s.whatsapp.net or …@lid, or a Telegram chat such as tg:-1001234567890"
	switch {
	case chat == "":
		return invalid("a chat id is required: %s", want)
	case hasControl(chat) || strings.ContainsFunc(chat, unicode.IsSpace):
		return invalid("chat id %q must not contain spaces or control characters", chat)
	case strings.ContainsAny(chat, `/\`):
		return invalid("chat id %q must not contain slashes", chat)
	}
	if name, ok := strings.CutPrefix(chat, LocalPrefix); ok {
		if len(name) > MaxLocalName || !localNameRE.MatchString(name) || strings.Contains(name, "..") {
			return invalid("chat id %q: a local chat name is 1 to %d letters, digits, dots, dashes or underscores, starting with a letter or digit, without ..",
				chat, MaxLocalName)
		}
		return nil
	}
	if id, ok := strings.CutPrefix(chat, TelegramPrefix); ok {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n != 0 && !strings.HasPrefix(id, "+") && !strings.HasPrefix(id, "-0") && id[0] != '0' {
			return nil
		}
		return invalid("chat id %q: a Telegram chat is tg: and its id, negative for a group (tg:-1001234567890)", chat)
	}
	user, server, ok := strings.Cut(chat, "@")
	if !ok {
		return invalid("chat id %q: %s", chat, want)
	}
	switch server {
	case "g.us":
		if groupUserRE.MatchString(user) {
			return nil
		}
	case "s.whatsapp.net", "lid":
		if digitsRE.MatchString(user) {
			return nil
		}
	}
	return invalid("chat id %q: %s", chat, want)
}

// IsLocalChat reports whether chat is a local chat id (it may still be
// invalid: see CheckChat).
func IsLocalChat(chat string) bool {
	return strings.HasPrefix(chat, LocalPrefix) && len(chat) > len(LocalPrefix)
}

// CheckFolder checks a group folder name (store.ValidateFolder: 1 to 64
// lowercase letters, digits and dashes, starting with a letter or digit, not
// global nor another of bridged's own directory names). The error also wraps
// store.ErrInvalidFolder.
func CheckFolder(folder string) error {
	if err := store.ValidateFolder(folder); err != nil {
		return &invalidError{msg: err.Error(), wrap: err}
	}
	return nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// Slug turns a display name into a folder name: lowercase letters and digits
// with dashes between words, at most store.MaxFolderLen characters. It may be
// empty (a name without any letter or digit a-z, 0-9).
func Slug(name string) string {
	s := nonSlug.ReplaceAllString(strings.ToLower(name), "-")
	s = strings.Trim(s, "-")
	if len(s) > store.MaxFolderLen {
		s = strings.TrimRight(s[:store.MaxFolderLen], "-")
	}
	return s
}

// NormName trims a group's display name and checks it: not empty, no control
// characters, at most MaxName characters.
func NormName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", invalid("a name is required")
	case hasControl(name):
		return "", invalid("name %q must not contain control characters", name)
	case utf8.RuneCountInString(name) > MaxName:
		return "", invalid("name %q is longer than %d characters", name, MaxName)
	}
	return name, nil
}

// NormTrigger normalises a trigger: trimmed, "@<assistant>" when empty, an
// "@" added when missing. The result is one word (no whitespace or control
// characters), has a letter or digit after the "@" and is at most
// MaxTrigger characters long. An empty assistant name means
// DefaultAssistantName.
func NormTrigger(trigger, assistant string) (string, error) {
	if assistant == "" {
		assistant = DefaultAssistantName
	}
	t := strings.TrimSpace(trigger)
	if t == "" {
		t = "@" + assistant
	}
	if !strings.HasPrefix(t, "@") {
		t = "@" + t
	}
	example := "@" + assistant
	switch {
	case hasControl(t) || strings.ContainsFunc(t, unicode.IsSpace):
		return "", invalid("trigger %q must be one word, without spaces, newlines or control characters (such as %s)", t, example)
	case !strings.ContainsFunc(t, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }):
		return "", invalid("trigger %q needs a letter or digit after the @ (such as %s)", t, example)
	case utf8.RuneCountInString(t) > MaxTrigger:
		return "", invalid("trigger %q is longer than %d characters", t, MaxTrigger)
	}
	return t, nil
}

// NewGroup is a group registration as a person (bridged groups add, POST
// /v1/groups) or the main agent (register_group) gives it.
type NewGroup struct {
	Chat    string
	Name    string
	Folder  string // empty: Slug(Name)
	Trigger string // empty: "@<assistant>"; "@" added when missing
	// RequiresTrigger defaults to true: only messages starting with the
	// trigger wake the agent.
	RequiresTrigger *bool
	IsMain          bool
	// Tools is the tool profile; empty: full for the main group, ask for
	// any other.
	Tools string
}

// ParseTools reads a tool profile name.
func ParseTools(v string) (store.ToolProfile, error) {
	p := store.ToolProfile(strings.ToLower(strings.TrimSpace(v)))
	if p == "readonly" {
		p = store.ToolsReadOnly
	}
	if !p.Valid() {
		return "", invalid("tool profile %q: want full, ask, read-only or chat", v)
	}
	return p, nil
}

// Group checks a registration and returns the group to store. assistant is
// the assistant's name, for the default trigger. Whether the chat, folder or
// main flag is taken is the store's to say.
func Group(in NewGroup, assistant string) (store.Group, error) {
	chat := strings.TrimSpace(in.Chat)
	if err := CheckChat(chat); err != nil {
		return store.Group{}, err
	}
	name, err := NormName(in.Name)
	if err != nil {
		return store.Group{}, err
	}
	folder := strings.TrimSpace(in.Folder)
	if folder == "" {
		if folder = Slug(name); folder == "" {
			return store.Group{}, invalid("name %q gives no folder name: choose a folder (lowercase letters, digits and dashes)", name)
		}
	}
	if err := CheckFolder(folder); err != nil {
		return store.Group{}, err
	}
	trigger, err := NormTrigger(in.Trigger, assistant)
	if err != nil {
		return store.Group{}, err
	}
	requires := true
	if in.RequiresTrigger != nil {
		requires = *in.RequiresTrigger
	}
	tools := store.ToolsAsk
	if in.IsMain {
		tools = store.ToolsFull
	}
	if in.Tools != "" {
		if tools, err = ParseTools(in.Tools); err != nil {
			return store.Group{}, err
		}
	}
	return store.Group{
		Tools:           tools,
		Chat:            store.ChatID(chat),
		Name:            name,
		Folder:          store.Folder(folder),
		Trigger:         trigger,
		RequiresTrigger: requires,
		IsMain:          in.IsMain,
	}, nil
}

// GroupChange changes some of a group's settings; nil fields are left alone.
type GroupChange struct {
	Name            *string
	Trigger         *string // must not be empty; "@" added when missing
	RequiresTrigger *bool
	Model           *string // one word; "" resets to the CLI's default
	Timeout         *string // Go duration of at least MinTimeout; "" or "0" resets to the daemon's default
	// Mounts replaces the extra mounts (empty: none). The mount allowlist
	// must have accepted them: this package checks only their shape.
	Mounts *[]store.MountRequest
	// BudgetDailyUSD is the most the agent may cost a day, in USD; 0 lifts
	// the budget.
	BudgetDailyUSD *float64
	// Allow replaces who may wake the agent besides the owner (see
	// store.NormalizeSender); empty: everyone.
	Allow *[]string
	// Others is store.OthersContext or store.OthersDrop.
	Others *string
	// Tools is the tool profile (full, ask, read-only, chat).
	Tools *string
	// Sees is which other groups' folders the main group's agent sees
	// (store.ParseSees: all, none or folders separated by commas); main
	// only. The store checks that each folder is a registered group's.
	Sees *string
}

// ChangeGroup applies c to g and returns the changed group.
func ChangeGroup(g store.Group, c GroupChange, assistant string) (store.Group, error) {
	var err error
	if c.Name != nil {
		if g.Name, err = NormName(*c.Name); err != nil {
			return store.Group{}, err
		}
	}
	if c.Trigger != nil {
		if strings.TrimSpace(*c.Trigger) == "" {
			return store.Group{}, invalid("the trigger must not be empty")
		}
		if g.Trigger, err = NormTrigger(*c.Trigger, assistant); err != nil {
			return store.Group{}, err
		}
	}
	if c.RequiresTrigger != nil {
		g.RequiresTrigger = *c.RequiresTrigger
	}
	if c.Model != nil {
		m := strings.TrimSpace(*c.Model)
		if hasControl(m) || strings.ContainsFunc(m, unicode.IsSpace) {
			return store.Group{}, invalid("model %q must be one word", m)
		}
		g.ContainerConfig.Model = m
	}
	if c.Timeout != nil {
		if g.ContainerConfig.Timeout, err = ParseTimeout(*c.Timeout); err != nil {
			return store.Group{}, err
		}
	}
	if c.BudgetDailyUSD != nil {
		b := *c.BudgetDailyUSD
		if b < 0 || math.IsNaN(b) || math.IsInf(b, 0) {
			return store.Group{}, invalid("the daily budget must be an amount of USD of at least 0 (0: no budget)")
		}
		g.ContainerConfig.BudgetDailyUSD = b
	}
	if c.Tools != nil {
		if g.Tools, err = ParseTools(*c.Tools); err != nil {
			return store.Group{}, err
		}
	}
	if c.Mounts != nil {
		ms := make([]store.MountRequest, 0, len(*c.Mounts))
		for _, m := range *c.Mounts {
			if err := checkMountShape(m); err != nil {
				return store.Group{}, err
			}
			ms = append(ms, m)
		}
		if len(ms) == 0 {
			ms = nil
		}
		g.ContainerConfig.ExtraMounts = ms
	}
	if c.Allow != nil {
		allow, err := store.NormalizeAllow(*c.Allow)
		if err != nil {
			return store.Group{}, invalid("%s", err)
		}
		g.Allow = allow
	}
	if c.Others != nil {
		switch o := strings.TrimSpace(*c.Others); o {
		case store.OthersContext, store.OthersDrop:
			g.Others = o
		default:
			return store.Group{}, invalid("others must be %s (stored as context) or %s (not stored), not %q", store.OthersContext, store.OthersDrop, o)
		}
	}
	if c.Sees != nil {
		sees, err := store.ParseSees(*c.Sees)
		if err != nil {
			return store.Group{}, invalid("sees: %s", err)
		}
		if !g.IsMain && !sees.None() {
			return store.Group{}, invalid("only the main group sees other groups' folders; %s is not the main group", g.Folder)
		}
		g.Sees = sees
	}
	return g, nil
}

// ParseTimeout reads a group's container timeout: "" or "0" is 0 (the
// daemon's default), anything else a Go duration of at least MinTimeout.
func ParseTimeout(v string) (time.Duration, error) {
	switch v = strings.TrimSpace(v); v {
	case "", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinTimeout {
		return 0, invalid("timeout %q: want a Go duration of at least %s, such as 45m (0 for the default)", v, formatDuration(MinTimeout))
	}
	return d, nil
}

func formatDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

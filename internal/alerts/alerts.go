// Package alerts tells the owner, in the main chat, about what needs them,
// once per condition, and keeps each group's agent within its daily budget.
//
// A condition is a key: raising a key posts its text once; it is not
// posted again until the key is cleared (the condition is over) or raised
// with a different detail. Raised keys are kept in a small state file, so
// a restart does not post them again. The conditions are WhatsApp logged
// out, banned, replaced or outdated (polled from the channels), each
// condition a channel reports in its status (a reachout timelock, a
// flapping connection, a suspended group, the app state out of sync, the
// phone offline: told once while it lasts, again when its end time
// changes), the disk
// under the home below MinFree (polled; BRIDGED_MIN_FREE, the floor below
// which the daemon also takes in no files), and what the router reports: a
// group that gave up after its retries until it runs well again (GaveUp,
// Recovered), a message that finally failed until one to its chat is sent
// (SendFailed, Sent), and a scheduled task that paused itself after failing
// too many times in a row (TaskPaused, once per pause).
//
// Budgets: the cost is the usage ledger's (what the credential proxy
// metered and priced, per API request). A group whose agent cost at least
// 80 % of its daily budget today (the configured timezone's day) is
// reported once in the main chat; at 100 % its agent is paused until
// midnight, with one notice in the group, and the proxy refuses its API
// requests (Refusal), so a turn in flight ends at its next request.
// Its messages wait. The pause lifts at midnight, or as soon as the owner
// raises or lifts the budget (`groups set --budget-daily`).
package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultInterval = time.Minute
	DefaultMinFree  = 1 << 30 // 1 GiB
)

// Alert keys of the conditions this package watches itself.
const (
	keyDisk = "disk-low"
)

// legacyWarningPrefix starts the keys of channel warnings as an earlier
// bridged kept them (the phone offline); the channel now reports them as
// conditions, so they are dropped from the state file.
const legacyWarningPrefix = "warning/"

func channelKey(name string) string         { return "channel/" + name }
func budgetWarnKey(f store.Folder) string   { return "budget-warn/" + string(f) }
func budgetPauseKey(f store.Folder) string  { return "budget-paused/" + string(f) }
func gaveUpKey(f store.Folder) string       { return "gave-up/" + string(f) }
func outboxFailedKey(c store.ChatID) string { return "outbox-failed/" + string(c) }
func taskPausedKey(id store.TaskID) string  { return "task-paused/" + string(id) }
func taskNotRunKey(id store.TaskID) string  { return "task-not-run/" + string(id) }

// apiRefusedPrefix starts the keys of the API's refusals, one per kind.
const apiRefusedPrefix = "api-refused/"

func apiRefusedKey(kind string) string { return apiRefusedPrefix + kind }

// Poster posts bridged's own messages and wakes the router's message loop.
// It is built before the alerts and the router (the daemon's commits to the
// outbox and wakes its sender and the ingest). Neither method blocks for
// long.
type Poster interface {
	// SendMessage commits text to chat's outbox and wakes its sender.
	SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error)
	// Rescan has every group's pending messages looked at again.
	Rescan()
}

// Config configures Alerts.
type Config struct {
	DB *store.DB
	// State is the file that keeps the raised keys across restarts
	// (<home>/store/alerts.json).
	State string
	// Home is the directory whose disk is watched.
	Home     string
	Timezone *time.Location // the budget's day; nil: UTC
	// Channels are polled for states that need the owner.
	Channels []channel.Channel
	// Poster posts the alerts; nil: nothing is raised (it is logged).
	Poster   Poster
	Log      zerolog.Logger
	Now      func() time.Time // nil: time.Now
	Interval time.Duration    // how often Run checks; 0: DefaultInterval
	MinFree  uint64           // free bytes under Home below which the owner is told; 0: DefaultMinFree
	// FreeBytes reports the free bytes of the disk holding path; nil:
	// statfs.
	FreeBytes func(path string) (uint64, error)
}

// entry is one raised key as kept in the state file.
type entry struct {
	Detail   string    `json:"detail,omitempty"`
	RaisedAt time.Time `json:"raised_at"`
}

type stateFile struct {
	Raised map[string]entry `json:"raised"`
}

// Alerts raises and clears the owner's alerts and applies the budgets.
// Create it with New and run Run.
type Alerts struct {
	cfg Config
	log zerolog.Logger

	poster Poster // nil: none

	mu     sync.Mutex // guards raised and the state file
	raised map[string]entry
}

// New loads the state file (a missing one is empty).
func New(cfg Config) (*Alerts, error) {
	if cfg.DB == nil || cfg.State == "" {
		return nil, errors.New("new alerts: no store or no state file")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timezone == nil {
		cfg.Timezone = time.UTC
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MinFree == 0 {
		cfg.MinFree = DefaultMinFree
	}
	if cfg.FreeBytes == nil {
		cfg.FreeBytes = statfsFree
	}
	a := &Alerts{cfg: cfg, log: cfg.Log.With().Str("component", "alerts").Logger(), raised: map[string]entry{}, poster: cfg.Poster}
	b, err := os.ReadFile(cfg.State)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read alert state: %w", err)
	default:
		var st stateFile
		if err := json.Unmarshal(b, &st); err != nil {
			// A damaged file costs at most one repeated alert per
			// condition: start empty rather than not at all.
			a.log.Warn().Err(err).Str("file", cfg.State).Msg("alert state unreadable; starting empty")
		} else if st.Raised != nil {
			a.raised = st.Raised
		}
	}
	for key := range a.raised {
		if strings.HasPrefix(key, legacyWarningPrefix) {
			delete(a.raised, key) // told now as a channel condition
		}
	}
	return a, nil
}

// Raise tells the owner text in the main chat unless key is raised
// already. When there is no main group or the post fails, the key stays
// unraised (it is logged).
func (a *Alerts) Raise(ctx context.Context, key, text string) {
	a.raise(ctx, key, "", "", text)
}

// Clear re-arms key: the next Raise posts again.
func (a *Alerts) Clear(ctx context.Context, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.raised[key]; !ok {
		return
	}
	delete(a.raised, key)
	a.log.Info().Str("alert", key).Msg("alert cleared")
	a.saveLocked()
}

// GaveUp tells the owner that group folder's agent failed attempts times in
// a row and gave up until the next message; why is the reason, one short
// line. It is told once until Recovered.
func (a *Alerts) GaveUp(ctx context.Context, folder store.Folder, attempts int, why string) {
	a.Raise(ctx, gaveUpKey(folder), fmt.Sprintf("The agent of group %s failed %d times in a row and gave up until the next message (%s). See `bridged status` and the logs.", folder, attempts, why))
}

// Recovered tells that group folder's agent ran well again; the API
// accepted its requests, so refusals told by APIRefused are over too.
func (a *Alerts) Recovered(ctx context.Context, folder store.Folder) {
	a.Clear(ctx, gaveUpKey(folder))
	a.mu.Lock()
	var refused []string
	for k := range a.raised {
		if strings.HasPrefix(k, apiRefusedPrefix) {
			refused = append(refused, k)
		}
	}
	a.mu.Unlock()
	for _, k := range refused {
		a.Clear(ctx, k)
	}
}

// APIRefused tells the owner that the Claude API refused a turn of group
// folder for a reason waiting cannot heal; label names the kind and status
// ("authentication, 401"), fix what to do. It is told once per kind, for
// all groups, until a group's agent runs well again.
func (a *Alerts) APIRefused(ctx context.Context, folder store.Folder, label, fix string) {
	kind, _, _ := strings.Cut(label, ",")
	a.Raise(ctx, apiRefusedKey(kind), fmt.Sprintf("The Claude API refused a turn of group %s (%s) and bridged does not retry it: %s.", folder, label, fix))
}

// SendFailed tells the owner that a message to chat (from group folder,
// empty for bridged's own) was given up; why is the reason, one short
// line. It is told once per chat until Sent.
func (a *Alerts) SendFailed(ctx context.Context, chat store.ChatID, folder store.Folder, why string) {
	where := string(chat)
	if folder != "" {
		where = fmt.Sprintf("group %s (%s)", folder, chat)
	}
	a.Raise(ctx, outboxFailedKey(chat), fmt.Sprintf("A message to %s could not be sent and was given up: %s. See `bridged status`.", where, why))
}

// TaskPaused tells the owner that scheduled task t paused itself after
// t.Failures failed runs in a row; why is the last failure, one short line.
// It is told once per pause: the detail is the failed run's start, so the
// same pause is never told twice, and the next one (after a resume) is.
func (a *Alerts) TaskPaused(ctx context.Context, t store.Task, why string) {
	detail := ""
	if t.LastRun != nil {
		detail = t.LastRun.UTC().Format(time.RFC3339Nano)
	}
	a.raise(ctx, taskPausedKey(t.ID), detail, "", fmt.Sprintf(
		"Scheduled task %s of group %s failed %d times in a row and is paused (last error: %s). "+
			"Once the cause is fixed, `bridged tasks resume %s` restarts it; `bridged tasks cancel %s` removes it.",
		t.ID, t.Folder, t.Failures, why, t.ID, t.ID))
}

// TaskNotRun tells the owner that scheduled task t was paused instead of
// run because the group that set its prompt may no longer choose what t's
// group runs (rules.TaskMayRun); why says so and what the owner can do.
// Each pause is told once: the detail is t's due run.
func (a *Alerts) TaskNotRun(ctx context.Context, t store.Task, why string) {
	detail := why
	if t.NextRun != nil {
		detail += " " + t.NextRun.UTC().Format(time.RFC3339Nano)
	}
	a.raise(ctx, taskNotRunKey(t.ID), detail, "", "Scheduled task "+string(t.ID)+" was not run: "+why)
}

// Sent tells that a message to chat went out.
func (a *Alerts) Sent(ctx context.Context, chat store.ChatID) {
	a.Clear(ctx, outboxFailedKey(chat))
}

// Raised returns the raised keys and their details.
func (a *Alerts) Raised() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.raised))
	for k, e := range a.raised {
		out[k] = e.Detail
	}
	return out
}

// raise posts text under key, to chat (empty: the main chat), unless key is
// raised with the same detail. It reports whether it posted.
func (a *Alerts) raise(ctx context.Context, key, detail string, chat store.ChatID, text string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.raised[key]; ok && e.Detail == detail {
		return false
	}
	log := a.log.With().Str("alert", key).Logger()
	if a.poster == nil {
		log.Warn().Msg("alert not told: nothing posts")
		return false
	}
	folder := store.Folder("")
	if chat == "" {
		g, err := a.cfg.DB.Groups.Main(ctx)
		if err != nil {
			log.Warn().Err(err).Msg("alert not told: no main chat")
			return false
		}
		chat, folder = g.Chat, g.Folder
	}
	if _, err := a.poster.SendMessage(ctx, string(chat), text, store.OriginNotice, string(folder)); err != nil {
		log.Error().Err(err).Msg("cannot post alert")
		return false
	}
	log.Info().Str("chat", string(chat)).Msg("alert told")
	a.raised[key] = entry{Detail: detail, RaisedAt: a.cfg.Now().UTC()}
	a.saveLocked()
	return true
}

// saveLocked writes the state file: temp file, fsync, rename. A failure is
// logged: at worst an alert is told again after a restart.
func (a *Alerts) saveLocked() {
	if err := writeFileAtomic(a.cfg.State, stateFile{Raised: a.raised}); err != nil {
		a.log.Error().Err(err).Msg("cannot save alert state")
	}
}

func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".alerts-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) //nolint:errcheck // gone after the rename
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Paused reports whether g's agent is paused by its daily budget: a budget
// is set and today's cost has reached it. When the cost cannot be read it
// reports false (logged): a broken read never stops an agent.
func (a *Alerts) Paused(ctx context.Context, g store.Group) bool {
	budget := g.ContainerConfig.BudgetDailyUSD
	if budget <= 0 {
		return false
	}
	cost, _, err := a.costToday(ctx, g.Folder)
	if err != nil {
		a.log.Error().Err(err).Str("group", string(g.Folder)).Msg("cannot read today's cost; budget not applied")
		return false
	}
	return rules.OverBudget(budget, cost)
}

// CostToday is what folder's agent cost today, as the usage ledger has it.
func (a *Alerts) CostToday(ctx context.Context, folder store.Folder) (float64, error) {
	cost, _, err := a.costToday(ctx, folder)
	return cost, err
}

// RefusalAt is asked by the credential proxy before g's agent sends a
// Claude API request, with today's cost as the proxy's ledger read it:
// "" lets it through; at the budget it returns the refusal's message, and
// tells the group (and the owner) once, as Spent does. The budget is g's
// as stored: a raised or lifted budget lets the next request through.
func (a *Alerts) RefusalAt(ctx context.Context, g store.Group, cost float64) string {
	budget := g.ContainerConfig.BudgetDailyUSD
	if budget <= 0 || !rules.OverBudget(budget, cost) {
		return ""
	}
	a.Spent(ctx, g)
	return fmt.Sprintf("bridged: this chat's daily budget is used up (%s of %s today); the agent pauses until midnight (%s) or until the owner raises the budget (`bridged groups set %s --budget-daily USD`)",
		rules.FormatUSD(cost), rules.FormatUSD(budget), a.cfg.Timezone, g.Folder)
}

// Spent checks g's budget after a recorded cost: at 80 % it tells the main
// chat once, at 100 % it tells the group once that its agent pauses until
// midnight (and the main chat, when the 80 % notice was skipped over). Both
// are once per day and budget: a new day or a new budget arms them again.
func (a *Alerts) Spent(ctx context.Context, g store.Group) {
	budget := g.ContainerConfig.BudgetDailyUSD
	if budget <= 0 {
		return
	}
	cost, day, err := a.costToday(ctx, g.Folder)
	if err != nil {
		a.log.Error().Err(err).Str("group", string(g.Folder)).Msg("cannot read today's cost; budget not checked")
		return
	}
	detail := fmt.Sprintf("%s $%g", day, budget)
	over := rules.OverBudget(budget, cost)
	if rules.NearBudget(budget, cost) {
		text := fmt.Sprintf("Group %s has used %s of its daily budget of %s (%d %%). At 100 %% its agent pauses until midnight (%s); raise or lift it with `bridged groups set %s --budget-daily USD`.",
			g.Folder, rules.FormatUSD(cost), rules.FormatUSD(budget), int(cost/budget*100), a.cfg.Timezone, g.Folder)
		if over {
			text = fmt.Sprintf("Group %s has used up its daily budget (%s of %s): its agent is paused until midnight (%s); its messages wait. Raise or lift the budget with `bridged groups set %s --budget-daily USD` (0: no budget).",
				g.Folder, rules.FormatUSD(cost), rules.FormatUSD(budget), a.cfg.Timezone, g.Folder)
		}
		a.raise(ctx, budgetWarnKey(g.Folder), detail, "", text)
	}
	if over {
		a.raise(ctx, budgetPauseKey(g.Folder), detail, g.Chat, fmt.Sprintf(
			"I have used up today's budget for this chat (%s of %s), so I am pausing until midnight (%s). Messages you send meanwhile are kept and answered then, or as soon as the owner raises the budget.",
			rules.FormatUSD(cost), rules.FormatUSD(budget), a.cfg.Timezone))
	}
}

// costToday returns what folder's agent cost today and today's date.
func (a *Alerts) costToday(ctx context.Context, folder store.Folder) (float64, string, error) {
	start, _ := rules.BudgetDay(a.cfg.Now(), a.cfg.Timezone)
	cost, err := a.cfg.DB.Usage.GroupCostSince(ctx, folder, start)
	return cost, start.Format(time.DateOnly), err
}

// Run checks the channels and the disk every Interval, and has the router
// look at every group again when a new day begins (paused groups resume).
// It returns when ctx ends.
func (a *Alerts) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	day := a.today()
	for {
		a.check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if d := a.today(); d != day {
			day = d
			if a.poster != nil {
				a.log.Info().Str("day", d).Msg("a new day: paused groups resume")
				a.poster.Rescan()
			}
		}
	}
}

func (a *Alerts) today() string {
	start, _ := rules.BudgetDay(a.cfg.Now(), a.cfg.Timezone)
	return start.Format(time.DateOnly)
}

// check looks at the channels and the disk once.
func (a *Alerts) check(ctx context.Context) {
	for _, ch := range a.cfg.Channels {
		st := ch.Status()
		key := channelKey(ch.Name())
		switch st.State {
		case channel.StateConnected:
			a.Clear(ctx, key)
		case channel.StateLoggedOut, channel.StateBanned, channel.StateOutdated, channel.StateReplaced:
			what := map[channel.ConnState]string{
				channel.StateLoggedOut: "is logged out",
				channel.StateBanned:    "is temporarily banned",
				channel.StateOutdated:  "refuses this version of bridged as outdated",
				channel.StateReplaced:  "was taken over by another client",
			}[st.State]
			text := fmt.Sprintf("%s %s.", ch.Name(), what)
			if st.Detail != "" {
				text += " " + st.Detail
			}
			a.raise(ctx, key, string(st.State), "", text)
		}
		a.checkConditions(ctx, ch.Name(), st.Conditions)
	}
	free, err := a.cfg.FreeBytes(a.cfg.Home)
	if err != nil {
		a.log.Warn().Err(err).Msg("cannot read free disk space")
		return
	}
	switch {
	case free < a.cfg.MinFree:
		a.raise(ctx, keyDisk, "", "", fmt.Sprintf("Only %s free on the disk of %s (below %s). bridged needs room for its database, logs and containers; free some space.",
			humanBytes(free), a.cfg.Home, humanBytes(a.cfg.MinFree)))
	case free >= a.cfg.MinFree+a.cfg.MinFree/5:
		// 20 % above the limit, so a disk hovering at it is not a flood.
		a.Clear(ctx, keyDisk)
	}
}

func statfsFree(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KB", n>>10)
	}
}

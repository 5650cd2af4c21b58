package whatsapp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
)

// Flapping: a connection that dropped flapDrops times within flapWindow is
// flapping until flapQuiet passed without a drop.
const (
	flapDrops  = 3
	flapWindow = 10 * time.Minute
	flapQuiet  = time.Hour
)

// Condition keys.
const (
	condFlapping     = "flapping"
	condTimelock     = "reachout-timelock"
	condSuspend      = "suspended/" // + the group's chat id
	condAppState     = "app-state"
	condPhoneOffline = "phone-offline"
)

// kvCondition is the prefix of a kept condition's key in bridged_kv.
const kvCondition = "condition/"

// conditions holds what limits the channel besides its connection state:
// the kept ones (a reachout timelock, suspended groups) are written to the
// device store's bridged_kv table, so a restart keeps them; flapping is
// computed from the recent drops.
type conditions struct {
	mu        sync.Mutex
	kept      map[string]channel.Condition
	drops     []time.Time // drops of a live connection within flapWindow
	flapSince time.Time
	flapUntil time.Time
	flapCount int // drops in the window when flapping began
}

func newConditions() *conditions {
	return &conditions{kept: make(map[string]channel.Condition)}
}

// noteDrop records that a live connection dropped at now.
func (k *conditions) noteDrop(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kept := k.drops[:0]
	for _, t := range k.drops {
		if now.Sub(t) < flapWindow {
			kept = append(kept, t)
		}
	}
	k.drops = append(kept, now)
	if len(k.drops) < flapDrops {
		return
	}
	if !now.Before(k.flapUntil) {
		k.flapSince = now
		k.flapCount = len(k.drops)
	}
	k.flapUntil = now.Add(flapQuiet)
}

// set records c under its key; it reports whether it changed anything.
func (k *conditions) set(c channel.Condition) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	old, ok := k.kept[c.Key]
	if ok && old.Until.Equal(c.Until) && old.Text == c.Text {
		return false
	}
	if ok {
		c.Since = old.Since // the same condition, told anew
	}
	k.kept[c.Key] = c
	return true
}

// clear drops key; it reports whether it was set.
func (k *conditions) clear(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.kept[key]
	delete(k.kept, key)
	return ok
}

// get returns key's condition when it is set and not over at now.
func (k *conditions) get(key string, now time.Time) (channel.Condition, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.kept[key]
	if !ok || (!c.Until.IsZero() && !now.Before(c.Until)) {
		return channel.Condition{}, false
	}
	return c, true
}

// list returns the conditions in force at now, sorted by key.
func (k *conditions) list(now time.Time) []channel.Condition {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []channel.Condition
	for _, c := range k.kept {
		if !c.Until.IsZero() && !now.Before(c.Until) {
			continue // over; Status no longer shows it
		}
		out = append(out, c)
	}
	if now.Before(k.flapUntil) {
		out = append(out, channel.Condition{
			Key: condFlapping, Health: channel.HealthFlapping, Since: k.flapSince,
			Text: fmt.Sprintf("The WhatsApp connection keeps dropping (%d drops within %s); bridged reconnects each time, "+
				"but messages may arrive late. Check this machine's network; `bridged status` shows when it is stable again.",
				k.flapCount, flapWindow),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// healthRank orders conditions when connected: the first that applies is
// the channel's health.
var healthRank = []channel.Health{
	channel.HealthRestricted, channel.HealthPhoneOffline, channel.HealthAppStateSync, channel.HealthFlapping,
}

// withHealth fills st's Health and Conditions: conds are the conditions
// in force (the kept ones and flapping, the app state and the phone).
func withHealth(st channel.Status, conds []channel.Condition) channel.Status {
	st.Conditions = conds
	sort.Slice(st.Conditions, func(i, j int) bool { return st.Conditions[i].Key < st.Conditions[j].Key })
	switch st.State {
	case channel.StateConnected:
		st.Health = channel.HealthStable
		for _, h := range healthRank {
			if hasHealth(st.Conditions, h) {
				st.Health = h
				break
			}
		}
	case channel.StateConnecting, channel.StateReconnecting:
		st.Health = channel.HealthConnecting
	case channel.StateDisconnected:
		st.Health = channel.HealthDown
	case channel.StateNotPaired:
		st.Health = channel.HealthNotPaired
	case channel.StateLoggedOut:
		st.Health = channel.HealthLoggedOut
	case channel.StateReplaced:
		st.Health = channel.HealthReplaced
	case channel.StateBanned:
		st.Health = channel.HealthBanned
	case channel.StateOutdated:
		st.Health = channel.HealthOutdated
	}
	return st
}

func hasHealth(cs []channel.Condition, h channel.Health) bool {
	for _, c := range cs {
		if c.Health == h {
			return true
		}
	}
	return false
}

// restrictions owns what WhatsApp limits besides the connection: the
// reachout timelock, suspended groups (restrict.go), and the conditions
// kept across restarts in the device store's bridged_kv.
type restrictions struct {
	*core
	cond *conditions
}

// keep sets cond and writes it to the device store, so a restart
// keeps it. A write failure is logged: the condition still holds until the
// daemon stops.
func (c *restrictions) keep(ctx context.Context, cond channel.Condition) {
	if !c.cond.set(cond) {
		return
	}
	b, err := json.Marshal(cond)
	if err == nil {
		err = c.kv.setKV(ctx, kvCondition+cond.Key, string(b))
	}
	if err != nil {
		c.log.Error().Err(err).Str("condition", cond.Key).Msg("cannot keep WhatsApp condition; a restart forgets it")
	}
}

// drop clears key and removes it from the device store.
func (c *restrictions) drop(ctx context.Context, key string) {
	c.cond.clear(key)
	if err := c.kv.deleteKV(ctx, kvCondition+key); err != nil {
		c.log.Error().Err(err).Str("condition", key).Msg("cannot forget WhatsApp condition; a restart shows it until it ends")
	}
}

// load reads the kept conditions from the device store; ended
// ones are removed.
func (c *restrictions) load(ctx context.Context) {
	kv, err := c.kv.listKV(ctx, kvCondition)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot read kept WhatsApp conditions")
		return
	}
	now := c.now()
	for key, v := range kv {
		var cond channel.Condition
		if err := json.Unmarshal([]byte(v), &cond); err != nil || cond.Key == "" {
			c.log.Warn().Str("key", key).Msg("unreadable kept WhatsApp condition; dropped")
			_ = c.kv.deleteKV(ctx, key)
			continue
		}
		if !cond.Until.IsZero() && !now.Before(cond.Until) {
			_ = c.kv.deleteKV(ctx, key)
			continue
		}
		c.cond.set(cond)
		c.log.Warn().Str("condition", cond.Key).Time("until", cond.Until).Msg("WhatsApp condition still in force")
	}
}

// setKV writes key in bridged_kv.
func (s *deviceStore) setKV(ctx context.Context, key, value string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO bridged_kv (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// deleteKV removes key from bridged_kv.
func (s *deviceStore) deleteKV(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM bridged_kv WHERE key = ?`, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// listKV returns the bridged_kv entries whose key starts with prefix.
func (s *deviceStore) listKV(ctx context.Context, prefix string) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, value FROM bridged_kv WHERE substr(key, 1, ?) = ?`, len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("list %s*: %w", prefix, err)
	}
	defer rows.Close()
	out := make(map[string]string)
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("list %s*: %w", prefix, err)
		}
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("list %s*: %w", prefix, err)
	}
	return out, nil
}

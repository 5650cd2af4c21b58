package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// decodeStrict parses out into v, refusing fields v does not name: the
// documented field names are the ones the output has.
func decodeStrict(t *testing.T, what, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: not the documented JSON: %v\n%s", what, err, out)
	}
}

// Each --json output parses, with the documented snake_case fields.
func TestJSONOutputs(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	run := func(args ...string) string {
		t.Helper()
		out, _, err := cli(t, ctx, nil, "", append(args, "--home", home, "--timezone", "UTC")...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}

	// Empty lists are [] (not null).
	for _, args := range [][]string{{"groups", "list", "--json"}, {"tasks", "list", "--json"}} {
		if out := run(args...); !strings.Contains(out, "[]") {
			t.Errorf("%v on an empty home = %s; want an empty list", args, out)
		}
	}

	run("groups", "add", "--name", "main", "--main", "local:main")
	run("groups", "set", "--budget-daily", "1.50", "main")
	db := openDB(t, home)
	next := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	tk, err := db.Tasks.Create(ctx, store.Task{Folder: "main", Chat: "local:main", Prompt: "water the plants", Kind: "interval", Value: "2h", NextRun: &next})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	if err := db.Tasks.FinishRun(ctx, store.TaskRun{TaskID: tk.ID, StartedAt: started, Duration: 1500 * time.Millisecond, Status: store.RunOK, Result: "done", CostUSD: 0.01}); err != nil {
		t.Fatal(err)
	}
	if err := db.Chats.Upsert(ctx, store.Chat{ID: "123@g.us", Name: "Family", Channel: "whatsapp", IsGroup: true}); err != nil {
		t.Fatal(err)
	}

	var groups struct {
		Groups []struct {
			Folder          string    `json:"folder"`
			Chat            string    `json:"chat"`
			Name            string    `json:"name"`
			Trigger         string    `json:"trigger"`
			RequiresTrigger bool      `json:"requires_trigger"`
			IsMain          bool      `json:"is_main"`
			Tools           string    `json:"tools"`
			CreatedAt       time.Time `json:"created_at"`
			BudgetDailyUSD  float64   `json:"budget_daily_usd"`
			CostTodayUSD    float64   `json:"cost_usd_today"`
			BudgetPaused    bool      `json:"budget_paused"`
			Allow           []string  `json:"allow"`
			Others          string    `json:"others"`
			Sees            string    `json:"sees"`
		} `json:"groups"`
	}
	decodeStrict(t, "groups list --json", run("groups", "list", "--json"), &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].Folder != "main" || groups.Groups[0].Chat != "local:main" || !groups.Groups[0].IsMain || groups.Groups[0].Trigger != "@Andy" || groups.Groups[0].Tools != "full" || groups.Groups[0].BudgetDailyUSD != 1.5 || groups.Groups[0].BudgetPaused || groups.Groups[0].Sees != "none" {
		t.Errorf("groups = %+v; want main", groups)
	}

	var chats struct {
		Chats []struct {
			ID           string    `json:"id"`
			Name         string    `json:"name"`
			Channel      string    `json:"channel"`
			IsGroup      bool      `json:"is_group"`
			LastActivity time.Time `json:"last_activity"`
			Folder       string    `json:"folder"`
		} `json:"chats"`
	}
	decodeStrict(t, "groups list --available --json", run("groups", "list", "--available", "--json"), &chats)
	if len(chats.Chats) != 1 || chats.Chats[0].ID != "123@g.us" || !chats.Chats[0].IsGroup {
		t.Errorf("chats = %+v; want the WhatsApp group only", chats)
	}

	var tasks struct {
		Tasks []struct {
			ID          string     `json:"id"`
			Folder      string     `json:"folder"`
			Chat        string     `json:"chat"`
			Prompt      string     `json:"prompt"`
			Kind        string     `json:"kind"`
			Value       string     `json:"value"`
			ContextMode string     `json:"context_mode"`
			Status      string     `json:"status"`
			NextRun     *time.Time `json:"next_run"`
			LastRun     *time.Time `json:"last_run"`
			LastResult  string     `json:"last_result"`
			CreatedAt   time.Time  `json:"created_at"`
			Failures    int        `json:"failures"`
			PausedByF   bool       `json:"paused_by_failures"`
		} `json:"tasks"`
	}
	decodeStrict(t, "tasks list --json", run("tasks", "list", "--json"), &tasks)
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].ID != string(tk.ID) || tasks.Tasks[0].Kind != "interval" || tasks.Tasks[0].Value != "2h" ||
		tasks.Tasks[0].LastRun == nil || !tasks.Tasks[0].LastRun.Equal(started) || tasks.Tasks[0].Status != "active" {
		t.Errorf("tasks = %+v; want the interval task, last run %s", tasks, started)
	}

	var runs struct {
		Task string `json:"task"`
		Runs []struct {
			ID        int64     `json:"id"`
			StartedAt time.Time `json:"started_at"`
			Duration  string    `json:"duration"`
			Status    string    `json:"status"`
			Result    string    `json:"result"`
			CostUSD   float64   `json:"cost_usd"`
		} `json:"runs"`
	}
	decodeStrict(t, "tasks runs --json", run("tasks", "runs", "--json", string(tk.ID)), &runs)
	if runs.Task != string(tk.ID) || len(runs.Runs) != 1 || runs.Runs[0].Status != "ok" || runs.Runs[0].Result != "done" || runs.Runs[0].CostUSD != 0.01 || !runs.Runs[0].StartedAt.Equal(started) {
		t.Errorf("runs = %+v; want the one ok run", runs)
	}

	var st map[string]any
	decodeStrict(t, "status --json", run("status", "--json"), &st)
	for _, k := range []string{"running", "groups", "tasks", "outbox", "cost_usd_today", "timezone", "database_bytes", "media_pending", "queue"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status --json lacks %q: %v", k, st)
		}
	}
	if n, _ := st["database_bytes"].(float64); n < 4096 {
		t.Errorf("status database_bytes = %v; want the database's size", st["database_bytes"])
	}

	var cfg map[string]string
	out, _, err := cli(t, ctx, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-json-secret-123456"}, "", "config", "--json", "--home", home)
	if err != nil {
		t.Fatal(err)
	}
	decodeStrict(t, "config --json", out, &cfg)
	if cfg["home"] != home || cfg["max_containers"] != "5" || cfg["retention"] != "90d" || cfg["anthropic_api_key"] == "" {
		t.Errorf("config --json = %v", cfg)
	}
	if strings.Contains(out, "json-secret") {
		t.Errorf("config --json shows the secret:\n%s", out)
	}

	var doc struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			Detail string `json:"detail"`
			Hint   string `json:"hint"`
		} `json:"checks"`
	}
	out, _, err = cli(t, ctx, nil, "", "doctor", "--json", "--home", home, "--mount-allowlist", filepath.Join(newHome(t), "none.json"))
	if !errors.Is(err, errChecksFailed) {
		t.Errorf("doctor --json without credentials: %v; want errChecksFailed", err)
	}
	decodeStrict(t, "doctor --json", out, &doc)
	statuses := map[string]string{}
	for _, c := range doc.Checks {
		statuses[c.Name] = c.Status
	}
	if doc.OK || statuses["credentials"] != "fail" || statuses["clock"] != "ok" || statuses["whatsapp"] != "warn" {
		t.Errorf("doctor --json = %+v; want ok false, credentials fail, clock ok, whatsapp warn", doc)
	}
}

package control

import (
	"time"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// Group is a registered group as the API shows it.
type Group struct {
	Folder          string               `json:"folder"`
	Chat            string               `json:"chat"`
	Name            string               `json:"name"`
	Trigger         string               `json:"trigger"`
	RequiresTrigger bool                 `json:"requires_trigger"`
	IsMain          bool                 `json:"is_main"`
	Model           string               `json:"model,omitempty"`
	Timeout         string               `json:"timeout,omitempty"` // Go duration; empty: the daemon's default
	ExtraMounts     []store.MountRequest `json:"extra_mounts,omitempty"`
	// Tools is the tool profile: full, ask, read-only or chat.
	Tools     string    `json:"tools"`
	CreatedAt time.Time `json:"created_at"`
	// BudgetDailyUSD is the most the agent may cost a day (0: no budget).
	BudgetDailyUSD float64 `json:"budget_daily_usd"`
	// CostTodayUSD is what the agent cost today (the configured timezone's
	// day); BudgetPaused says the budget is used up, so the agent is paused
	// until PausedUntil (the next midnight) or until the budget is raised.
	// Filled in by the group list.
	CostTodayUSD float64    `json:"cost_usd_today"`
	BudgetPaused bool       `json:"budget_paused"`
	PausedUntil  *time.Time `json:"paused_until,omitempty"`
	// Allow lists who may wake the agent besides the owner: sender ids
	// and "admins"; empty: everyone. Others says what becomes of anyone
	// else's message: "context" (stored, wakes nothing) or "drop".
	Allow  []string `json:"allow"`
	Others string   `json:"others"`
	// Sees is which other groups' folders the main group's agent sees,
	// read-only: "all", "none" or folders separated by commas; "none" for
	// every other group.
	Sees string `json:"sees"`
	// Applies says, in the answer to a change of the group (PATCH), how
	// the change reaches its agent: "applied: the running agent was
	// stopped", "applies when the current turn ends" or "applies from the
	// next message".
	Applies string `json:"applies,omitempty"`
}

// GroupAdd registers a chat as a group (POST /v1/groups).
type GroupAdd struct {
	Chat   string `json:"chat"`
	Name   string `json:"name"`
	Folder string `json:"folder,omitempty"` // default: a slug of Name
	// Trigger defaults to "@<assistant name>"; a missing "@" is added.
	Trigger string `json:"trigger,omitempty"`
	// RequiresTrigger defaults to true: only messages starting with the
	// trigger wake the agent.
	RequiresTrigger *bool `json:"requires_trigger,omitempty"`
	IsMain          bool  `json:"is_main,omitempty"`
	// Tools is the tool profile; empty: full for the main group, ask for
	// any other.
	Tools string `json:"tools,omitempty"`
}

// GroupPatch changes some of a group's settings (PATCH /v1/groups/{folder}).
// Nil fields are left alone.
type GroupPatch struct {
	Name            *string `json:"name,omitempty"`
	Trigger         *string `json:"trigger,omitempty"`
	RequiresTrigger *bool   `json:"requires_trigger,omitempty"`
	Model           *string `json:"model,omitempty"`   // "" resets to the CLI's default
	Timeout         *string `json:"timeout,omitempty"` // Go duration; "" or "0" resets to the daemon's default
	// ExtraMounts replaces the group's extra mounts; an empty list clears
	// them. Each must pass the mount allowlist now, or nothing changes.
	ExtraMounts *[]store.MountRequest `json:"extra_mounts,omitempty"`
	// BudgetDailyUSD sets the most the agent may cost a day in USD; 0
	// lifts the budget.
	BudgetDailyUSD *float64 `json:"budget_daily_usd,omitempty"`
	// Allow replaces who may wake the agent besides the owner: phone
	// numbers, NUMBER@lid, local:NAME, "admins"; an empty list: everyone.
	Allow *[]string `json:"allow,omitempty"`
	// Others is "context" (others' messages are stored and shown to the
	// agent, wake nothing) or "drop" (not stored).
	Others *string `json:"others,omitempty"`
	// Tools sets the tool profile: full, ask, read-only or chat.
	Tools *string `json:"tools,omitempty"`
	// Sees sets which other groups' folders the main group's agent sees,
	// read-only under /workspace/groups: "all", "none" or registered
	// folders separated by commas (main only).
	Sees *string `json:"sees,omitempty"`
}

// Chat is a chat bridged has seen.
type Chat struct {
	ID           string    `json:"id"`
	Name         string    `json:"name,omitempty"`
	Channel      string    `json:"channel,omitempty"`
	IsGroup      bool      `json:"is_group"`
	LastActivity time.Time `json:"last_activity,omitzero"`
	Folder       string    `json:"folder,omitempty"` // set when registered
}

// Task is a scheduled task.
type Task struct {
	ID          string     `json:"id"`
	Folder      string     `json:"folder"`
	Chat        string     `json:"chat"`
	Prompt      string     `json:"prompt"`
	Kind        string     `json:"kind"`
	Value       string     `json:"value"`
	ContextMode string     `json:"context_mode"`
	Status      string     `json:"status"`
	NextRun     *time.Time `json:"next_run,omitempty"`
	LastRun     *time.Time `json:"last_run,omitempty"`
	LastResult  string     `json:"last_result,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	// Failures counts the task's failed runs in a row; PausedByFailures
	// says the task paused itself when they reached
	// BRIDGED_TASK_MAX_FAILURES (`tasks resume` restarts it).
	Failures         int  `json:"failures"`
	PausedByFailures bool `json:"paused_by_failures"`
}

// TaskAdd is a task the owner schedules for a group (POST /v1/tasks).
// Kind is cron, interval or once, Value its schedule as the agents'
// schedule_task takes it; ContextMode is isolated (the default) or group.
type TaskAdd struct {
	Folder      string `json:"folder"`
	Kind        string `json:"kind"`
	Value       string `json:"value"`
	Prompt      string `json:"prompt"`
	ContextMode string `json:"context_mode,omitempty"`
}

// TaskRun is one run of a task.
type TaskRun struct {
	ID        int64     `json:"id"`
	StartedAt time.Time `json:"started_at"`
	Duration  string    `json:"duration"`
	Status    string    `json:"status"`
	Result    string    `json:"result,omitempty"`
	Error     string    `json:"error,omitempty"`
	CostUSD   float64   `json:"cost_usd"`
}

// Direction says who wrote a chat message.
type Direction string

// Directions.
const (
	In  Direction = "in"  // a person
	Out Direction = "out" // the assistant
)

// ChatMessage is a stored message of a local chat.
type ChatMessage struct {
	ID        int64     `json:"id"`
	Direction Direction `json:"direction"`
	Sender    string    `json:"sender"`
	Text      string    `json:"text"`
	Time      time.Time `json:"time"`
}

// PostMessage is the body of POST /v1/chats/{chat}/messages (or its
// "message" part when files are attached; the text may then be empty).
type PostMessage struct {
	Sender string `json:"sender"` // the owner's name; default "you"
	Text   string `json:"text"`
	// As, when set, posts as another member of the chat named As (sender
	// id "local:<As>"), not the owner: the group's allow list decides
	// whether it may wake the agent. Sender is then ignored.
	As string `json:"as,omitempty"`
}

// Posted is the answer to PostMessage: the stored messages' ids, one per
// attached file (a single one without files), and ID, the last of them,
// whose turn takes them all.
type Posted struct {
	ID  int64   `json:"id"`
	IDs []int64 `json:"ids,omitempty"`
}

// Messages is the answer to GET /v1/chats/{chat}/messages.
type Messages struct {
	Messages []ChatMessage `json:"messages"`
}

// Status is what `bridged status` shows. The store's part is always there;
// the live part (channels, containers, queue) only while the daemon runs.
type Status struct {
	Running    bool              `json:"running"`
	Daemon     *Daemon           `json:"daemon,omitempty"`
	Channels   []ChannelStatus   `json:"channels,omitempty"`
	Containers []ContainerStatus `json:"containers,omitempty"`
	Queue      QueueStatus       `json:"queue"`
	Groups     int               `json:"groups"`
	Tasks      TaskCounts        `json:"tasks"`
	Outbox     OutboxCounts      `json:"outbox"`
	// MediaPending counts inbound media still being fetched: each holds
	// its chat's next turn.
	MediaPending int       `json:"media_pending"`
	Failures     []Failure `json:"failures,omitempty"` // recent, newest first
	// CostToday is what the agents cost today by the credential proxy's
	// meter (the usage ledger): the figure budgets count.
	CostToday float64 `json:"cost_usd_today"`
	// ReportedCostToday is what the CLI itself reported for today's turns:
	// a cross-check of the meter, never counted (an agent can forge it).
	ReportedCostToday float64 `json:"cli_reported_cost_usd_today"`
	// BudgetPaused lists the groups whose agent is paused because their
	// daily budget is used up.
	BudgetPaused []string `json:"budget_paused,omitempty"`
	Timezone     string   `json:"timezone"`
	// DatabaseBytes is the size of the database (store/bridged.db).
	DatabaseBytes int64 `json:"database_bytes"`
	// APIUsage is each group's Claude API use seen by the daemon's
	// credential proxy since it started: live, while turns still run.
	APIUsage []APIUsage `json:"api_usage,omitempty"`
	// Credential is the Claude credential's state: the running daemon's,
	// or, with the daemon stopped, what the files configure.
	Credential *Credential `json:"credential,omitempty"`
}

// APIUsage is one group's API use counted by the credential proxy from the
// responses' usage; the cost is an estimate at list prices.
type APIUsage struct {
	Group               string    `json:"group"`
	Requests            int64     `json:"requests"`
	InputTokens         int64     `json:"input_tokens"`
	OutputTokens        int64     `json:"output_tokens"`
	CacheReadTokens     int64     `json:"cache_read_input_tokens"`
	CacheCreationTokens int64     `json:"cache_creation_input_tokens"`
	CostUSD             float64   `json:"estimated_cost_usd"`
	Last                time.Time `json:"last"`
}

// Daemon describes the running daemon.
type Daemon struct {
	PID      int       `json:"pid"`
	Version  string    `json:"version,omitempty"`
	Instance string    `json:"instance,omitempty"`
	Started  time.Time `json:"started"`
}

// ChannelStatus is one channel's connection state.
type ChannelStatus struct {
	Name   string    `json:"name"`
	State  string    `json:"state"`
	Detail string    `json:"detail,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Health is one word: "stable" only when connected with no condition
	// (see docs/whatsapp.md for the others).
	Health string `json:"health,omitempty"`
	// Conditions are what limits the channel while it lasts.
	Conditions []ChannelCondition `json:"conditions,omitempty"`
	// Polled is when a polling channel (Telegram) last had an answer.
	Polled time.Time `json:"polled,omitzero"`
}

// ChannelCondition is one thing that limits a channel while it lasts: a
// reachout timelock, a flapping connection, a suspended group.
type ChannelCondition struct {
	Key    string    `json:"key"`
	Health string    `json:"health"`
	Text   string    `json:"text"`
	Since  time.Time `json:"since,omitzero"`
	Until  time.Time `json:"until,omitzero"` // zero: unknown
}

// ContainerStatus is one live agent container.
type ContainerStatus struct {
	Group   string    `json:"group"`
	Kind    string    `json:"kind"` // "messages" or "task"
	TaskID  string    `json:"task_id,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	Idle    bool      `json:"idle,omitempty"`
	Closing bool      `json:"closing,omitempty"`
}

// QueueStatus counts the group queue's runs.
type QueueStatus struct {
	Active  int `json:"active"`
	Waiting int `json:"waiting"`
}

// TaskCounts counts tasks by state.
type TaskCounts struct {
	Active int `json:"active"`
	Paused int `json:"paused"`
}

// OutboxCounts counts outbox rows by state.
type OutboxCounts struct {
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
}

// Failure is something that went wrong for good and a person should see.
type Failure struct {
	Time  time.Time `json:"time"`
	Kind  string    `json:"kind"`  // "outbox", "task" or "run"
	Where string    `json:"where"` // the chat, task id or group
	Error string    `json:"error"`
}

// Live is the part of the status only the running daemon knows.
type Live struct {
	Containers []ContainerStatus
	Queue      QueueStatus
	// Failures are runs that failed for good (retries exhausted).
	Failures []Failure
	// APIUsage is the credential proxy's per-group tally.
	APIUsage []APIUsage
}

func groupOut(g store.Group) Group {
	out := Group{
		Folder:          string(g.Folder),
		Chat:            string(g.Chat),
		Name:            g.Name,
		Trigger:         g.Trigger,
		RequiresTrigger: g.RequiresTrigger,
		IsMain:          g.IsMain,
		Model:           g.ContainerConfig.Model,
		ExtraMounts:     g.ContainerConfig.ExtraMounts,
		CreatedAt:       g.CreatedAt,
		BudgetDailyUSD:  g.ContainerConfig.BudgetDailyUSD,
		Allow:           g.Allow,
		Others:          g.Others,
		Tools:           string(g.Tools),
		Sees:            g.Sees.String(),
	}
	if out.Allow == nil {
		out.Allow = []string{}
	}
	if out.Tools == "" {
		out.Tools = string(store.ToolsFull)
	}
	if g.ContainerConfig.Timeout > 0 {
		out.Timeout = g.ContainerConfig.Timeout.String()
	}
	return out
}

func taskOut(t store.Task) Task {
	return Task{
		ID:          string(t.ID),
		Folder:      string(t.Folder),
		Chat:        string(t.Chat),
		Prompt:      t.Prompt,
		Kind:        string(t.Kind),
		Value:       t.Value,
		ContextMode: string(t.ContextMode),
		Status:      string(t.Status),
		NextRun:     t.NextRun,
		LastRun:     t.LastRun,
		LastResult:  t.LastResult,
		CreatedAt:   t.CreatedAt,

		Failures:         t.Failures,
		PausedByFailures: t.PausedByFailures,
	}
}

func runOut(r store.TaskRun) TaskRun {
	return TaskRun{
		ID:        r.ID,
		StartedAt: r.StartedAt,
		Duration:  r.Duration.String(),
		Status:    string(r.Status),
		Result:    r.Result,
		Error:     r.Error,
		CostUSD:   rules.RoundUSD(r.CostUSD),
	}
}

// SessionEnded is the answer to ending a group's session (DELETE
// /v1/groups/{folder}/session): Applies says what became of a live
// container of the group, as in Group.Applies.
type SessionEnded struct {
	Folder  string `json:"folder"`
	Applies string `json:"applies"`
}

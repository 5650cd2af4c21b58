package control

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/store"
)

// StateMetricer is a channel that reports its own state gauge (the WhatsApp
// channel does).
type StateMetricer interface {
	StateMetric() (name string, value int)
}

// metricWriter writes the Prometheus text exposition format.
type metricWriter struct{ b bytes.Buffer }

func (m *metricWriter) head(name, typ, help string) {
	fmt.Fprintf(&m.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (m *metricWriter) value(name string, labels string, v float64) {
	if labels != "" {
		name += "{" + labels + "}"
	}
	fmt.Fprintf(&m.b, "%s %s\n", name, strconv.FormatFloat(v, 'g', -1, 64))
}

func (m *metricWriter) single(name, typ, help string, v float64) {
	m.head(name, typ, help)
	m.value(name, "", v)
}

// labelEscape escapes a label value; built once (a Replacer's first use
// builds its tables: per label, that was most of a scrape with many groups).
var labelEscape = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// label quotes a label value.
func label(k, v string) string {
	return k + `="` + labelEscape.Replace(v) + `"`
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := s.Status(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stored, err := s.opts.Admin.MessagesStored(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var m metricWriter
	m.single("bridged_up", "gauge", "Whether the bridged daemon is up.", 1)
	m.single("bridged_messages_stored_total", "counter", "Messages stored since the database was created (both directions).", float64(stored))
	m.single("bridged_outbox_pending", "gauge", "Outbox messages waiting to be sent.", float64(st.Outbox.Pending))
	m.single("bridged_outbox_failed_total", "counter", "Outbox messages that could not be delivered.", float64(st.Outbox.Failed))
	m.single("bridged_containers_running", "gauge", "Agent containers running.", float64(len(st.Containers)))
	m.single("bridged_queue_active", "gauge", "Group runs in progress.", float64(st.Queue.Active))
	m.single("bridged_queue_waiting", "gauge", "Groups waiting for a container slot.", float64(st.Queue.Waiting))
	m.single("bridged_groups", "gauge", "Registered groups.", float64(st.Groups))
	m.head("bridged_tasks", "gauge", "Scheduled tasks by status.")
	m.value("bridged_tasks", label("status", "active"), float64(st.Tasks.Active))
	m.value("bridged_tasks", label("status", "paused"), float64(st.Tasks.Paused))
	m.head("bridged_channel_connected", "gauge", "Whether each channel is connected.")
	for _, c := range st.Channels {
		m.value("bridged_channel_connected", label("channel", c.Name), b2f(c.State == "connected"))
	}
	for _, c := range s.opts.Channels {
		if sm, ok := c.(StateMetricer); ok {
			name, v := sm.StateMetric()
			m.single(name, "gauge", "Connection state of the "+c.Name()+" channel (see its documentation for the values).", float64(v))
		}
	}
	m.single("bridged_cost_usd_today", "gauge", "Cost of agent turns since midnight in the configured timezone, in USD.", st.CostToday)
	if err := s.groupMetrics(ctx, &m); err != nil {
		s.fail(w, r, err)
		return
	}
	writeRuntime(&m)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(m.b.Bytes())
}

// groupMetrics writes each registered group's figures of today (the
// configured timezone's day), labelled with its folder.
func (s *Server) groupMetrics(ctx context.Context, m *metricWriter) error {
	a := s.opts.Admin
	groups, err := a.Groups(ctx)
	if err != nil {
		return err
	}
	start, _ := rules.BudgetDay(a.now(), a.loc())
	// Every group's count of today in one indexed read of today's messages.
	byChat, err := a.DB.Messages.CountSinceByChat(ctx, start)
	if err != nil {
		return err
	}
	msgs := make([]store.ChatCounts, len(groups))
	for i, g := range groups {
		msgs[i] = byChat[store.ChatID(g.Chat)]
	}
	m.head("bridged_group_cost_usd_today", "gauge", "Cost of each group's agent today (the usage ledger: the proxy's meter), in USD.")
	for _, g := range groups {
		m.value("bridged_group_cost_usd_today", label("group", g.Folder), g.CostTodayUSD)
	}
	m.head("bridged_group_budget_usd_daily", "gauge", "Each group's daily budget in USD; groups without a budget are left out.")
	for _, g := range groups {
		if g.BudgetDailyUSD > 0 {
			m.value("bridged_group_budget_usd_daily", label("group", g.Folder), g.BudgetDailyUSD)
		}
	}
	m.head("bridged_group_budget_paused", "gauge", "Whether each group's agent is paused because its daily budget is used up.")
	for _, g := range groups {
		m.value("bridged_group_budget_paused", label("group", g.Folder), b2f(g.BudgetPaused))
	}
	m.head("bridged_group_messages_today", "gauge", "Messages of each group's chat sent today: in from people, out from bridged.")
	for i, g := range groups {
		m.value("bridged_group_messages_today", label("group", g.Folder)+","+label("direction", "in"), float64(msgs[i].In))
		m.value("bridged_group_messages_today", label("group", g.Folder)+","+label("direction", "out"), float64(msgs[i].Out))
	}
	return nil
}

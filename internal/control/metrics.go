package control

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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

// label quotes a label value.
func label(k, v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return k + `="` + r.Replace(v) + `"`
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
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(m.b.Bytes())
}

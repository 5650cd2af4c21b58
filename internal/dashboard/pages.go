package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
)

// conversationSize is how many of a group's latest messages its page shows.
const conversationSize = 50

// costDays is how many days the cost plots cover.
const costDays = 14

// page is what every template gets.
type page struct {
	Title string
	Nav   string // the section of the menu to mark
	CSRF  string
	Data  any
}

// parsePages parses the page templates, each with the layout. Their links
// are written under Prefix ("/dashboard/…"); they are parsed with prefix,
// the daemon's secret path, in its place.
func parsePages(when func(time.Time) string, prefix string) (map[string]*template.Template, error) {
	fm := template.FuncMap{"when": when}
	for k, v := range funcs {
		fm[k] = v
	}
	names, err := fs.Glob(assets, "assets/templates/*.html")
	if err != nil {
		return nil, err
	}
	source := func(name string) (string, error) {
		b, err := fs.ReadFile(assets, name)
		return strings.ReplaceAll(string(b), `"`+Prefix, `"`+prefix), err
	}
	layout, err := source("assets/templates/layout.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := n[len("assets/templates/"):]
		if base == "layout.html" {
			continue
		}
		src, err := source(n)
		if err != nil {
			return nil, err
		}
		t := template.New(base).Funcs(fm)
		if _, err := t.New("layout.html").Parse(layout); err != nil {
			return nil, fmt.Errorf("dashboard template layout.html: %w", err)
		}
		if _, err := t.Parse(src); err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", base, err)
		}
		pages[base[:len(base)-len(".html")]] = t
	}
	return pages, nil
}

var funcs = template.FuncMap{
	"usd": func(v float64) string { return usdUnit(v) },
	"pct": func(cost, budget float64) int {
		if budget <= 0 {
			return 0
		}
		return min(100, int(cost/budget*100))
	},
	"since": func(ms int64) string {
		if ms < 0 {
			return fmt.Sprintf("%d ms before", -ms)
		}
		return fmt.Sprintf("+%d ms", ms)
	},
	"deref": func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	},
	"allowed": allowed,
}

// allowed says who may wake a group's agent.
func allowed(g control.Group) string {
	switch {
	case len(g.Allow) == 0:
		return "everyone"
	case len(g.Allow) == 1 && g.Allow[0] == store.AllowOwner:
		return "the owner only"
	}
	return "the owner, " + strings.Join(g.Allow, ", ")
}

func (d *Dashboard) loc() *time.Location {
	if d.opts.Admin.Timezone != nil {
		return d.opts.Admin.Timezone
	}
	return time.Local
}

// render writes page name with data.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, name, title, nav string, data any) {
	d.pagesOnce.Do(func() { d.pages, d.pagesErr = parsePages(d.when, d.prefix) })
	t := d.pages[name]
	if d.pagesErr != nil || t == nil {
		d.log.Error().Err(d.pagesErr).Str("page", name).Msg("dashboard templates")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	p := page{Title: title, Nav: nav, Data: data}
	if s := sessionOf(r); s != nil {
		p.CSRF = s.csrf
	}
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		d.log.Error().Err(err).Str("page", name).Msg("dashboard page failed")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// when formats a time in the configured timezone ("" when zero).
func (d *Dashboard) when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(d.loc()).Format("2006-01-02 15:04:05")
}

func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, store.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrDecided):
		code = http.StatusConflict
	case errors.Is(err, control.ErrInvalid), errors.Is(err, store.ErrInvalid):
		code = http.StatusBadRequest
	default:
		d.log.Error().Err(err).Str("path", r.URL.Path).Msg("dashboard request failed")
	}
	w.WriteHeader(code)
	d.render(w, r, "error", "error", "", err.Error())
}

// groupRow is a group with today's cost against its budget.
type groupRow struct {
	control.Group
	Container *control.ContainerStatus
}

// overviewGroups is the most groups the overview's table shows.
const overviewGroups = 100

type overviewData struct {
	Status       control.Status
	Groups       []groupRow
	MoreGroups   int // the groups left out of the table (overviewGroups)
	Approvals    []Approval
	ApprovalsOn  bool
	ApprovalsErr string
	Cost         template.HTML
	Latency      template.HTML
	Messages     template.HTML
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := d.opts.Source.Status(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	gs, err := d.opts.Admin.Groups(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out := overviewData{Status: st}
	for _, g := range gs {
		out.Groups = append(out.Groups, groupRow{Group: g, Container: containerOf(st, g.Folder)})
	}
	// The page is bounded: the groups that are doing something first (a
	// live container, the main group, a cost today), at most
	// overviewGroups of them.
	slices.SortStableFunc(out.Groups, func(a, b groupRow) int {
		rank := func(g groupRow) int {
			switch {
			case g.Container != nil:
				return 0
			case g.IsMain:
				return 1
			case g.CostTodayUSD > 0:
				return 2
			}
			return 3
		}
		return rank(a) - rank(b)
	})
	if len(out.Groups) > overviewGroups {
		out.MoreGroups = len(out.Groups) - overviewGroups
		out.Groups = out.Groups[:overviewGroups]
	}
	out.Approvals, out.ApprovalsOn, out.ApprovalsErr = d.listApprovals(ctx)
	if out.Cost, err = d.costPlot(ctx, ""); err == nil {
		if out.Latency, err = d.latencyPlot(ctx, ""); err == nil {
			out.Messages, err = d.messagesPlot(ctx, "")
		}
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "overview", "overview", "overview", out)
}

func containerOf(st control.Status, folder string) *control.ContainerStatus {
	for i, c := range st.Containers {
		if c.Group == folder && c.Kind != "task" {
			return &st.Containers[i]
		}
	}
	for i, c := range st.Containers {
		if c.Group == folder {
			return &st.Containers[i]
		}
	}
	return nil
}

// listApprovals lists the open approvals: whether the service is there,
// and its error as text.
func (d *Dashboard) listApprovals(ctx context.Context) ([]Approval, bool, string) {
	if d.opts.Approvals == nil {
		return nil, false, ""
	}
	as, err := d.opts.Approvals.List(ctx)
	if err != nil {
		return nil, true, err.Error()
	}
	return as, true, ""
}

// message is a conversation's message as the page and the live events show
// it.
type message struct {
	ID        int64  `json:"id"`
	Direction string `json:"direction"`
	Sender    string `json:"sender"`
	Text      string `json:"text"`
	Time      string `json:"time"`
	Story     string `json:"story"`
}

func (d *Dashboard) messageOut(m store.Message, chat string) message {
	out := message{ID: int64(m.ID), Direction: "in", Sender: m.SenderName, Text: m.Text, Time: d.when(m.SentAt)}
	if out.Sender == "" {
		out.Sender = m.Sender
	}
	if m.IsBot {
		out.Direction = "out"
		if out.Sender == "" {
			out.Sender = d.opts.Admin.AssistantName
		}
	}
	out.Story = d.prefix + "messages/" + strconv.FormatInt(out.ID, 10) + "?chat=" + urlQuery(chat)
	return out
}

type groupData struct {
	Group     control.Group
	Container *control.ContainerStatus
	Messages  []message
	After     int64
	Tasks     []control.Task
	// Changes are the group's latest turns that changed its files or
	// memory, newest first.
	Changes []control.ChangeInfo
	Cost    template.HTML
	Latency template.HTML
	PerHour template.HTML
}

func (d *Dashboard) group(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	g, err := d.groupOf(ctx, r.PathValue("folder"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	st, err := d.opts.Source.Status(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out := groupData{Group: g, Container: containerOf(st, g.Folder)}
	ms, err := d.opts.Admin.DB.Messages.Recent(ctx, store.ChatID(g.Chat), conversationSize)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, m := range ms {
		out.Messages = append(out.Messages, d.messageOut(m, g.Chat))
		out.After = int64(m.ID)
	}
	if out.After == 0 {
		id, err := d.opts.Admin.DB.Messages.LatestID(ctx, store.ChatID(g.Chat))
		if err != nil {
			d.fail(w, r, err)
			return
		}
		out.After = int64(id)
	}
	tasks, err := d.opts.Admin.Tasks(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, t := range tasks {
		if t.Folder == g.Folder {
			out.Tasks = append(out.Tasks, t)
		}
	}
	if cs, err := d.opts.Admin.Changes(ctx, g.Folder, time.Time{}); err == nil {
		out.Changes = cs[:min(len(cs), 10)]
	}
	if out.Cost, err = d.costPlot(ctx, g.Folder); err == nil {
		if out.Latency, err = d.latencyPlot(ctx, g.Chat); err == nil {
			out.PerHour, err = d.messagesPlot(ctx, g.Chat)
		}
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "group", g.Name, "overview", out)
}

func (d *Dashboard) tasks(w http.ResponseWriter, r *http.Request) {
	ts, err := d.opts.Admin.Tasks(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "tasks", "tasks", "tasks", ts)
}

type taskData struct {
	Task control.Task
	Runs []control.TaskRun
}

func (d *Dashboard) task(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ts, err := d.opts.Admin.Tasks(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(ts, func(t control.Task) bool { return t.ID == r.PathValue("id") })
	if i < 0 {
		d.fail(w, r, fmt.Errorf("no task %q: %w", r.PathValue("id"), store.ErrNotFound))
		return
	}
	runs, err := d.opts.Admin.TaskRuns(ctx, ts[i].ID, 50)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "task", "task "+ts[i].ID, "tasks", taskData{Task: ts[i], Runs: runs})
}

type approvalsData struct {
	Approvals []Approval
	On        bool
	Err       string
	Done      string
	CSRF      string
}

func (d *Dashboard) approvals(w http.ResponseWriter, r *http.Request) {
	as, on, e := d.listApprovals(r.Context())
	done := ""
	switch r.URL.Query().Get("done") {
	case "allow":
		done = "Approved."
	case "always":
		done = "Approved, and allowed from now on."
	case "deny":
		done = "Denied."
	}
	d.render(w, r, "approvals", "approvals", "approvals", approvalsData{Approvals: as, On: on, Err: e, Done: done, CSRF: sessionOf(r).csrf})
}

// decide carries out an approve or deny button.
func (d *Dashboard) decide(w http.ResponseWriter, r *http.Request) {
	if d.opts.Approvals == nil {
		d.fail(w, r, fmt.Errorf("no approval service: %w", store.ErrNotFound))
		return
	}
	decision := r.PostFormValue("decision")
	var allow, always bool
	switch decision {
	case "allow":
		allow = true
	case "always":
		allow, always = true, true
	case "deny":
	default:
		d.fail(w, r, fmt.Errorf("%w: decision %q: want allow, always or deny", control.ErrInvalid, decision))
		return
	}
	id := r.PathValue("id")
	if err := d.opts.Approvals.Decide(r.Context(), id, allow, always, "dashboard"); err != nil {
		d.fail(w, r, err)
		return
	}
	d.log.Info().Str("approval", id).Str("decision", decision).Msg("approval decided on the dashboard")
	http.Redirect(w, r, d.prefix+"approvals?done="+decision, http.StatusSeeOther)
}

func (d *Dashboard) story(w http.ResponseWriter, r *http.Request) {
	st, err := d.opts.Source.Story(r.Context(), r.PathValue("id"), r.URL.Query().Get("chat"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "story", fmt.Sprintf("message %d", st.Message.ID), "", st)
}

// costPlot is the cost per day of the last costDays days, per group
// (folder "": every group).
func (d *Dashboard) costPlot(ctx context.Context, folder string) (template.HTML, error) {
	loc := d.loc()
	now := d.opts.Now().In(loc)
	y, m, dd := now.Date()
	first := time.Date(y, m, dd-costDays+1, 0, 0, 0, 0, loc)
	rows, err := d.costByHour(ctx, first)
	if err != nil {
		return "", err
	}
	labels := make([]string, costDays)
	for i := range labels {
		labels[i] = first.AddDate(0, 0, i).Format("Jan 2")
	}
	var ss []series
	idx := map[string]int{}
	for _, c := range rows {
		if folder != "" && string(c.Folder) != folder {
			continue
		}
		h := c.Hour.In(loc)
		day := int(time.Date(h.Year(), h.Month(), h.Day(), 0, 0, 0, 0, loc).Sub(first).Hours()+12) / 24
		if day < 0 || day >= costDays {
			continue
		}
		k, ok := idx[string(c.Folder)]
		if !ok {
			k = len(ss)
			idx[string(c.Folder)] = k
			ss = append(ss, series{Name: string(c.Folder), Values: make([]float64, costDays)})
		}
		ss[k].Values[day] += c.CostUSD
	}
	return plot{Title: fmt.Sprintf("Cost per day (last %d days, USD)", costDays), Labels: labels, Series: costliest(ss, len(palette)-1), Unit: usdUnit,
		Empty: "No cost metered in the last 14 days."}.svg(), nil
}

// costliest keeps the n series of the largest sums, costliest first, and
// adds the others up into one ("12 other groups"): a plot of a thousand
// groups stays a plot of n+1 colours, as cheap to draw as one of a few.
func costliest(ss []series, n int) []series {
	if len(ss) <= n+1 {
		return ss
	}
	sum := func(s series) (t float64) {
		for _, v := range s.Values {
			t += v
		}
		return t
	}
	ss = slices.Clone(ss)
	slices.SortStableFunc(ss, func(a, b series) int { return cmp.Compare(sum(b), sum(a)) })
	rest := series{Name: fmt.Sprintf("%d other groups", len(ss)-n), Values: make([]float64, len(ss[0].Values))}
	for _, s := range ss[n:] {
		for i, v := range s.Values {
			rest.Values[i] += v
		}
	}
	return append(ss[:n:n], rest)
}

// latencyPlot is the time the last answered turns took (chat "": every
// chat's), from the newest message they took to their end.
func (d *Dashboard) latencyPlot(ctx context.Context, chat string) (template.HTML, error) {
	ls, err := d.opts.Admin.DB.Turns.Latencies(ctx, store.ChatID(chat), d.opts.Now().Add(-7*24*time.Hour), 60)
	if err != nil {
		return "", err
	}
	return latency(ls, d.loc()).svg(), nil
}

// latency plots the answered turns ls, each a bar of the agent's time and,
// above it, the time its approvals waited for the owner.
func latency(ls []store.TurnLatency, loc *time.Location) plot {
	p := plot{Title: "Turn latency (the last answered turns, seconds)", Unit: secondsUnit, Empty: "No answered turn in the last 7 days."}
	// The owner's time answering an approval is not the agent's: it is a
	// part of its own, apart from the turn's.
	s, wait := series{Name: "turn"}, series{Name: "waiting for approval"}
	waited := false
	for _, l := range ls {
		p.Labels = append(p.Labels, l.At.In(loc).Format("Jan 2 15:04"))
		s.Values = append(s.Values, (l.Latency - l.Approval).Seconds())
		wait.Values = append(wait.Values, l.Approval.Seconds())
		waited = waited || l.Approval > 0
	}
	p.Series = []series{s}
	if waited {
		p.Series = append(p.Series, wait)
	}
	return p
}

// messagesPlot counts the messages per hour of the last 24 hours (chat "":
// every chat's), from people and from bridged.
func (d *Dashboard) messagesPlot(ctx context.Context, chat string) (template.HTML, error) {
	end := d.opts.Now().Truncate(time.Hour)
	first := end.Add(-23 * time.Hour)
	var hs []store.HourlyMessages
	var err error
	if chat == "" {
		hs, err = d.messagesByHour(ctx, first)
	} else {
		hs, err = d.opts.Admin.DB.Messages.ByHour(ctx, store.ChatID(chat), first)
	}
	if err != nil {
		return "", err
	}
	p := plot{Title: "Messages per hour (last 24 hours)", Unit: countUnit, Empty: "No message in the last 24 hours."}
	in, out := series{Name: "from people", Values: make([]float64, 24)}, series{Name: "from bridged", Values: make([]float64, 24)}
	for i := 0; i < 24; i++ {
		p.Labels = append(p.Labels, first.Add(time.Duration(i)*time.Hour).In(d.loc()).Format("Jan 2 15h"))
	}
	for _, h := range hs {
		i := int(h.Hour.Sub(first) / time.Hour)
		if i >= 0 && i < 24 {
			in.Values[i] += float64(h.In)
			out.Values[i] += float64(h.Out)
		}
	}
	p.Series = []series{in, out}
	return p.svg(), nil
}

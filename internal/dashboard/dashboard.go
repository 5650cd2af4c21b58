package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store"
)

//go:embed assets
var assets embed.FS

// Prefix is the path under which the control socket hands requests to the
// dashboard. The dashboard itself answers only under its own secret path
// below it, Prefix + <secret> + "/" (see Options.PathFile): a browser sends
// the session cookie only there, never to another program on another
// loopback port (cookies ignore ports), which could not name the path.
const Prefix = "/dashboard/"

// Source is what the running daemon reports beside the store: the full
// status and a message's story with the live part (control.Server).
type Source interface {
	Status(ctx context.Context) (control.Status, error)
	Story(ctx context.Context, ref, chat string) (control.Story, error)
}

// Approval is one request of an agent that waits for the owner's yes or no.
type Approval struct {
	ID      string
	Group   string // the group's folder
	Action  string // what the agent asks to do
	Detail  string // its arguments, as the agent gave them
	AskedAt time.Time
	Expires time.Time // zero: no deadline
}

// Approvals is the approval service: the open requests, and the owner's
// decision on one (always: allow it from now on without asking). Decide
// applies the same rules as the command line; by names who decided.
type Approvals interface {
	List(ctx context.Context) ([]Approval, error)
	Decide(ctx context.Context, id string, allow, always bool, by string) error
}

// ErrDecided is Decide's error for a request decided before (the page
// answers 409); an unknown id is store.ErrNotFound (404).
var ErrDecided = errors.New("approval request already decided")

// Options configure a Dashboard.
type Options struct {
	Source Source
	Admin  *control.Admin // the store's groups, tasks and messages
	// Approvals is the approval service; nil: the dashboard shows none.
	Approvals Approvals
	// Wait returns a channel closed when the next message is stored in a
	// local chat (the local channel's Wait); nil: the live conversation
	// checks the store every PollEvery only.
	Wait func(ctx context.Context) <-chan struct{}
	// Addr is the loopback address to serve on besides the control socket
	// (BRIDGED_DASHBOARD); "": the control socket only.
	Addr string
	// PathFile keeps the secret of the dashboard's path across restarts
	// (<home>/store/dashboard-path): made at the first start, mode 0600,
	// so a bookmark keeps working. "": a new secret for each Dashboard.
	PathFile string
	Log      zerolog.Logger
	Now      func() time.Time
	// PollEvery is how often a live conversation checks the store for
	// messages of channels that do not wake it (0: DefaultPollEvery).
	PollEvery time.Duration
}

// DefaultPollEvery is how often a live conversation looks for new messages
// no wake announced (a WhatsApp chat's).
const DefaultPollEvery = 2 * time.Second

// heartbeat keeps a live conversation's connection from idling out.
const heartbeat = 25 * time.Second

// Dashboard serves the pages.
type Dashboard struct {
	opts Options
	log  zerolog.Logger
	auth *auth
	// pages are parsed at the first page served: an idle daemon whose
	// dashboard nobody opens holds none of them.
	pagesOnce sync.Once
	pages     map[string]*template.Template
	pagesErr  error
	mux       *http.ServeMux
	// prefix is the path the dashboard answers under: Prefix, its secret,
	// a slash.
	prefix       string
	ln           net.Listener // the loopback TCP listener, nil when off
	done         chan struct{}
	costs        costHours    // the cost plots' hours gone by (costcache.go)
	messageHours messageHours // the overview's messages per hour (messagecache.go)
}

// ErrNotLoopback refuses a BRIDGED_DASHBOARD that is not a loopback address.
var ErrNotLoopback = errors.New("the dashboard listens on a loopback address only (such as 127.0.0.1:8080)")

// New builds the dashboard and, when opts.Addr is set, listens there (an
// address other than loopback is refused).
func New(opts Options) (*Dashboard, error) {
	if opts.Source == nil || opts.Admin == nil {
		return nil, errors.New("dashboard: no source")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = DefaultPollEvery
	}
	if err := CheckAddr(opts.Addr); err != nil {
		return nil, err
	}
	seg, err := pathSecret(opts.PathFile)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{
		opts:   opts,
		log:    opts.Log.With().Str("component", "dashboard").Logger(),
		auth:   newAuth(opts.Now),
		prefix: Prefix + seg + "/",
		done:   make(chan struct{}),
	}
	d.mux = d.routes()
	if opts.Addr != "" {
		if d.ln, err = net.Listen("tcp", opts.Addr); err != nil {
			return nil, fmt.Errorf("dashboard: listen on %s: %w", opts.Addr, err)
		}
	}
	return d, nil
}

// Addr is the loopback address the dashboard listens on ("" when off).
func (d *Dashboard) Addr() string {
	if d.ln == nil {
		return ""
	}
	return d.ln.Addr().String()
}

// Login makes a one-time login link.
func (d *Dashboard) Login() (control.DashboardLogin, error) {
	code, exp := d.auth.newCode()
	l := control.DashboardLogin{Path: d.prefix + "login?code=" + code, Expires: exp}
	if a := d.Addr(); a != "" {
		l.URL = "http://" + a + l.Path
	}
	return l, nil
}

// Close releases the TCP listener of a dashboard that will not Run.
func (d *Dashboard) Close() error {
	if d.ln != nil {
		return d.ln.Close()
	}
	return nil
}

// Run serves the loopback TCP address, when set, until ctx ends; then it
// ends the live conversations (on both the socket and TCP).
func (d *Dashboard) Run(ctx context.Context) error {
	stop := sync.OnceFunc(func() { close(d.done) })
	defer stop()
	if d.ln == nil {
		<-ctx.Done()
		return nil
	}
	srv := &http.Server{Handler: d.tcpHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(d.ln) }()
	d.log.Info().Str("addr", d.Addr()).Msg("dashboard listening")
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("dashboard shutdown: %w", err)
	}
	return nil
}

// tcpHandler serves the dashboard's routes on TCP, nothing else, to
// requests whose Host is the loopback address (a page elsewhere that
// rebinds its name to 127.0.0.1 is refused).
func (d *Dashboard) tcpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if ip := net.ParseIP(strings.Trim(host, "[]")); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "misdirected request: the dashboard answers on its loopback address only", http.StatusMisdirectedRequest)
			return
		}
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			http.NotFound(w, r)
			return
		}
		d.ServeHTTP(w, r)
	})
}

// ServeHTTP serves a dashboard request: a path under its secret prefix;
// any other answers 404 and tells nothing.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, d.prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	// The routes are written under Prefix: the request is handed on with
	// the secret taken out of its path.
	u := *r.URL
	u.Path, u.RawPath = Prefix+rest, ""
	r = r.Clone(r.Context())
	r.URL = &u
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer (here and in the layout's meta): with
	// no-referrer Chromium sends the page's own form POSTs with
	// "Origin: null", which sameOrigin refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if rest == "login" {
		d.login(w, r)
		return
	}
	s := d.auth.session(r)
	if s == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(loggedOut))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if !sameOrigin(r) || !validCSRF(s, r.PostFormValue("csrf")) {
			http.Error(w, "refused: a change must come from the dashboard's own page (missing or wrong CSRF token, or another origin)", http.StatusForbidden)
			return
		}
	}
	d.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
}

type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

const loggedOut = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>bridged: log in</title></head>
<body><h1>bridged</h1><p>Not logged in. Run <code>bridged dashboard</code> on the machine bridged runs on and open the link it prints (each link works once).</p></body></html>`

// login spends a one-time code and sets the session cookie.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id := d.auth.login(r.URL.Query().Get("code"))
	if id == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(strings.Replace(loggedOut, "Not logged in.", "This login link was used already or has expired.", 1)))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: d.prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		MaxAge: int(SessionTTL / time.Second),
	})
	d.log.Info().Msg("dashboard login")
	http.Redirect(w, r, d.prefix, http.StatusSeeOther)
}

// Routes are the dashboard's routes (every one but the login link needs a
// session).
var Routes = []string{
	"GET " + Prefix + "static/",
	"GET " + Prefix + "{$}",
	"GET " + Prefix + "groups/{folder}",
	"GET " + Prefix + "groups/{folder}/events",
	"GET " + Prefix + "tasks",
	"GET " + Prefix + "tasks/{id}",
	"GET " + Prefix + "approvals",
	"POST " + Prefix + "approvals/{id}",
	"GET " + Prefix + "messages/{id}",
	"POST " + Prefix + "logout",
	"GET " + Prefix + "groups/{folder}/changes/{id}",
	"POST " + Prefix + "groups/{folder}/changes/{id}/undo",
}

func (d *Dashboard) routes() *http.ServeMux {
	static, _ := fs.Sub(assets, "assets/static")
	handlers := []http.Handler{
		http.StripPrefix(Prefix+"static/", http.FileServerFS(static)),
		http.HandlerFunc(d.overview),
		http.HandlerFunc(d.group),
		http.HandlerFunc(d.events),
		http.HandlerFunc(d.tasks),
		http.HandlerFunc(d.task),
		http.HandlerFunc(d.approvals),
		http.HandlerFunc(d.decide),
		http.HandlerFunc(d.story),
		http.HandlerFunc(d.logout),
		http.HandlerFunc(d.diff),
		http.HandlerFunc(d.undo),
	}
	mux := http.NewServeMux()
	for i, pattern := range Routes {
		mux.Handle(pattern, handlers[i])
	}
	return mux
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	d.auth.logout(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: d.prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(strings.Replace(loggedOut, "Not logged in.", "Logged out.", 1)))
}

// chatOf is a folder's group, or ErrNotFound.
func (d *Dashboard) groupOf(ctx context.Context, folder string) (control.Group, error) {
	gs, err := d.opts.Admin.Groups(ctx)
	if err != nil {
		return control.Group{}, err
	}
	for _, g := range gs {
		if g.Folder == folder {
			return g, nil
		}
	}
	return control.Group{}, fmt.Errorf("no group %q: %w", folder, store.ErrNotFound)
}

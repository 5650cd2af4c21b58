package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/bridged-app/bridged/groups"
	"github.com/bridged-app/bridged/internal/alerts"
	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/channel/telegram"
	"github.com/bridged-app/bridged/internal/channel/whatsapp"
	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/dashboard"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ingest"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/outbox"
	"github.com/bridged-app/bridged/internal/remotecontrol"
	"github.com/bridged-app/bridged/internal/retention"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/scheduler"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/transcribe"
	"github.com/bridged-app/bridged/internal/turns"
)

// dockerTimeout bounds the start-up checks against the Docker engine.
const dockerTimeout = 15 * time.Second

// taskCloseDelay closes a task's container this long after its first result.
const taskCloseDelay = 10 * time.Second

func (a *app) cmdRun(ctx context.Context, args []string) error {
	fs := a.newFlagSet("run", "run [flags]")
	_, cfg, err := a.parseConfig(fs, args, 0, 0)
	if err != nil {
		return err
	}
	// A daemon whose output goes to a pipe (`make run | tee log`) outlives
	// the pipe's reader: with SIGPIPE notified, a write to a broken stdout
	// or stderr fails with EPIPE instead of killing the process (the Go
	// runtime kills on a broken fd 1 or 2 otherwise), and the log writer
	// drops what it can no longer write, so the drain still stops every
	// container. Nothing reads the channel: the signal package drops a
	// signal the full channel cannot take, so no goroutine outlives run.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	w := a.stderr
	if !isTerminal(w) {
		w = &pipeSafe{w: w}
	}
	log := newLogger(cfg, w)
	for _, w := range append(cfg.Warnings, cfg.Unknown...) {
		log.Warn().Msg(w)
	}
	return runDaemon(ctx, cfg, log)
}

// pipeSafe writes to w until a write fails with EPIPE (the reader is gone),
// then drops every later write as written.
type pipeSafe struct {
	w      io.Writer
	broken atomic.Bool
}

func (p *pipeSafe) Write(b []byte) (int, error) {
	if p.broken.Load() {
		return len(b), nil
	}
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.broken.Store(true)
		return len(b), nil
	}
	return n, err
}

// prepareHome creates the home layout and installs the shipped CLAUDE.md
// templates where none exist, or still unedited under an earlier name of
// the assistant (through the home: groups/ is agent-writable).
func prepareHome(hm *home.Home, assistant string, log zerolog.Logger) error {
	if err := hm.Layout().Prepare(); err != nil {
		return err
	}
	s, err := groups.Sync(hm, assistant)
	if err != nil {
		return fmt.Errorf("prepare home: %w", err)
	}
	for _, p := range s.Renamed {
		log.Info().Str("file", p).Str("assistant", assistant).Msg("memory template written again for the assistant's new name")
	}
	for _, p := range s.Stale {
		log.Warn().Str("file", p).Str("old_name", s.Old).Msg("an edited memory file still names the assistant's old name; left as it is")
	}
	return nil
}

// containerUser is the uid:gid containers run as: BRIDGED_CONTAINER_UID/GID
// when the daemon runs as root, else the daemon's own.
func containerUser(cfg *config.Config, log zerolog.Logger) (uid, gid int) {
	uid, gid, ignored := cfg.ContainerUser(os.Geteuid(), os.Getegid())
	if ignored {
		log.Info().Int("uid", uid).Int("gid", gid).
			Msg("not running as root: BRIDGED_CONTAINER_UID is the base of the group uids only; an agent without a uid of its own runs as the daemon's uid:gid")
	}
	return uid, gid
}

func newInstanceID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkDocker makes sure the engine answers and the agent image exists.
func checkDocker(ctx context.Context, d *container.Docker, image string) error {
	cctx, cancel := context.WithTimeout(ctx, dockerTimeout)
	defer cancel()
	if err := d.Ping(cctx); err != nil {
		return fmt.Errorf("docker is not reachable (is the Docker engine running, and may this user use its socket?): %w", err)
	}
	ok, err := d.ImageExists(cctx, image)
	if err != nil {
		return fmt.Errorf("check agent image %s: %w", image, err)
	}
	if !ok {
		return fmt.Errorf("agent image %s is not in Docker: build it with `make image` (it needs Docker Hub and npm; without them, `make test-image` builds bridged-agent:test, whose claude is a scripted fake), or set BRIDGED_IMAGE to an image that exists", image)
	}
	return nil
}

// ipcRecoverer is the IPC host's start-up step (ipchost.Host.Recover).
type ipcRecoverer interface {
	Recover(ctx context.Context) (int, error)
}

// taskRecoverer is the scheduler's start-up step (scheduler.Recover).
type taskRecoverer interface {
	Recover(ctx context.Context) error
}

// recoverStart deals with what a previous daemon of the same home left when
// it stopped uncleanly (kill -9, a crash, a power cut), before any part of
// this one runs, in this order (DESIGN §11: agent actions exactly once):
//
//  1. Its containers are stopped and removed, so none of them writes another
//     request: a container outlives the daemon that started it and finishes
//     its turn.
//  2. The requests they wrote are quarantined, not carried out
//     (ipchost.Host.Recover): their turns were cut off before anything was
//     committed and run again from the cursors, so each action happens once,
//     in the re-run. This must follow step 1, or a request written meanwhile
//     would be carried out and then again by the re-run; and it must come
//     before the router starts any container, whose requests are this
//     daemon's own.
//  3. The task runs they were doing are closed as interrupted, each with one
//     notice in its chat (scheduler.Recover), committed before the router's
//     outbox sender starts so that the notices go out at once.
//
// Only then do the router, the IPC host, the scheduler and the channels
// start. The router's own start-up cleanup then finds no container left.
func recoverStart(ctx context.Context, rt container.Runtime, homeDir, instance string, ipcHost ipcRecoverer, tasks taskRecoverer, log zerolog.Logger) error {
	container.StopLeftovers(ctx, rt, homeDir, instance, log)
	if _, err := ipcHost.Recover(ctx); err != nil {
		return err
	}
	return tasks.Recover(ctx)
}

// noticePoster commits bridged's own message to a chat's outbox
// (outbox.Poster).
type noticePoster interface {
	SendMessage(ctx context.Context, chat, text string, origin store.Origin, folder string) (store.OutboxItem, error)
}

// settleApprovals denies the approval requests a stopped bridged left open
// (their containers are gone), once, with a notice each, and tells the
// owner once of what an upgrade kept as it was: the groups registered
// before tool profiles kept full, and the main group of a home made before
// it could be narrowed still sees every group's folder.
func settleApprovals(ctx context.Context, db *store.DB, ap *approvals.Service, out noticePoster, log zerolog.Logger) error {
	n, err := ap.SettleOpen(ctx)
	if err != nil {
		return fmt.Errorf("settle open approvals: %w", err)
	}
	if n > 0 {
		log.Warn().Int("approvals", n).Msg("approval requests left open by the previous bridged denied")
	}
	for _, notice := range []struct{ name, text string }{
		{"tool_profiles", "Tool profiles: the groups registered before this version keep the full profile (every tool, no questions). " +
			"To have a group ask you before commands that change things, web fetches and writes outside its folder: " +
			"`bridged groups set FOLDER --tools ask` (or read-only, chat); `bridged groups list` shows each group's profile. See README \"Permissions\"."},
		{"main_sees", "Other groups' folders: your main chat's agent still reads every group's folder, as before this version. " +
			"To let it read only some, or none: `bridged groups set MAIN --sees FOLDER,FOLDER` (or --sees none); " +
			"a new install's main sees none. See docs/security.md."},
	} {
		told, err := db.Notices.Take(ctx, notice.name)
		if err != nil {
			return err
		}
		if !told {
			continue
		}
		log.Warn().Msg(notice.text)
		if main, err := db.Groups.Main(ctx); err == nil {
			if _, err := out.SendMessage(ctx, string(main.Chat), notice.text, store.OriginNotice, ""); err != nil {
				log.Warn().Err(err).Str("notice", notice.name).Msg("upgrade notice not posted")
			}
		}
	}
	return nil
}

// waRefresher adapts the WhatsApp client to ipchost.GroupRefresher.
type waRefresher struct{ c *whatsapp.Client }

func (r waRefresher) RefreshGroups(ctx context.Context) error {
	_, err := r.c.RefreshGroups(ctx)
	return err
}

// newAPIProxy builds the credential proxy: the only holder of the Claude
// credential. Its per-container sockets live in data/proxy (daemon-owned,
// never agent-writable); what a previous daemon left there is removed. With
// no credential it warns once: the agents' API requests are answered 401.
func newAPIProxy(cfg *config.Config, l home.Layout, ledger credproxy.Ledger, log zerolog.Logger) (*credproxy.Proxy, error) {
	dir := filepath.Join(l.DataDir(), "proxy")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear the proxy socket directory: %w", err)
	}
	p, err := credproxy.New(credproxy.Config{
		Upstream:   cfg.AnthropicURL,
		APIKey:     cfg.Secrets[config.EnvAPIKey],
		OAuthToken: cfg.Secrets[config.EnvOAuthToken],
		Dir:        dir,
		Log:        log,
		Limits:     proxyLimits(cfg),
		Ledger:     ledger,
	})
	if err != nil {
		return nil, fmt.Errorf("BRIDGED_ANTHROPIC_URL: %w", err)
	}
	checkFDLimit(cfg, log)
	if p.Mode() == credproxy.ModeNone {
		log.Warn().Msg(credproxy.NoCredentialMessage + " (until then the agents' Claude API requests are answered 401)")
	} else {
		log.Info().Str("upstream", p.Upstream()).Str("credential", p.Mode()).Msg("credential proxy ready; the credential stays in the daemon")
	}
	if p.Mode() == credproxy.ModeOAuth {
		log.Warn().Msg(credproxy.OAuthWarning)
	}
	return p, nil
}

// proxyAdapter gives the router the proxy's per-container sockets.
type proxyAdapter struct{ p *credproxy.Proxy }

func (a proxyAdapter) Open(group, name string) (string, func(), error) {
	ep, err := a.p.Open(group, name)
	if err != nil {
		return "", nil, err
	}
	return ep.Dir, func() { _ = ep.Close() }, nil
}

func (a proxyAdapter) Auth() string { return a.p.Mode() }

// liveStatus adapts the router's status to the control API's.
type liveStatus struct {
	rt    *router.Router
	proxy *credproxy.Proxy
}

func (l liveStatus) Live() control.Live {
	live := liveFromRouter(l.rt.Status())
	if l.proxy != nil {
		live.APIUsage = apiUsage(l.proxy.Usage())
	}
	return live
}

// waSink is what WhatsApp delivers to: a message's group lookup and the
// message to the ingest (which writes its chat in the same commit and
// wakes the router), chat metadata and the outbox's ids to the store. Every call runs under the context of the event
// it serves.
type waSink struct {
	in *ingest.Ingest
	db *store.DB
}

var _ whatsapp.Sink = waSink{}

func (s waSink) Lookup(ctx context.Context, chat string) (ingest.Changed, error) {
	return s.in.Lookup(ctx, chat)
}

func (s waSink) Inbound(ctx context.Context, seen ingest.Changed, m channel.Message) (store.MessageID, error) {
	return s.in.InboundSeen(ctx, seen, m)
}

func (s waSink) ChatSeen(ctx context.Context, chat, name string, isGroup bool) error {
	return s.db.Chats.Upsert(ctx, store.Chat{ID: store.ChatID(chat), Name: name, Channel: whatsapp.ChannelName, IsGroup: isGroup, LastActivity: time.Now()})
}

var _ whatsapp.ContactHistory = waSink{}

// HasHistory says yes on a database error: WhatsApp refuses the message
// itself if it must.
func (s waSink) HasHistory(ctx context.Context, chat string) bool {
	ok, err := s.db.Messages.HasWritten(ctx, store.ChatID(chat))
	return err != nil || ok
}

func (s waSink) IsOwnMessage(ctx context.Context, chat, id string) bool {
	own, err := s.db.Outbox.IsOwn(ctx, store.ChatID(chat), id)
	return err == nil && own
}

// channelOf names the channel that owns chat, as each channel's Owns
// decides.
func channelOf(chat string) string {
	switch {
	case local.IsLocal(chat):
		return local.Name
	case whatsapp.Owns(chat):
		return whatsapp.ChannelName
	case telegram.Owns(chat):
		return telegram.ChannelName
	}
	return ""
}

// groupsChanged tells the IPC host and the router that groups changed: a
// paused group whose budget was raised or lifted resumes at once.
type groupsChanged struct {
	host *ipchost.Host
	rt   *router.Router
}

func (g groupsChanged) SyncGroups(ctx context.Context) error {
	g.rt.Rescan()
	return g.host.SyncGroups(ctx)
}

var (
	_ control.SettingsApplier = groupsChanged{}
	_ control.SessionEnder    = groupsChanged{}
)

func (g groupsChanged) EndSession(ctx context.Context, folder string) (string, error) {
	a, err := g.rt.EndSession(ctx, store.Folder(folder))
	return a.String(), err
}

func (g groupsChanged) ApplySettings(ctx context.Context, folder string) (string, error) {
	a, err := g.rt.ApplySettings(ctx, store.Folder(folder))
	return a.String(), err
}

// runDaemon runs the daemon until ctx ends, then drains and returns nil.
// Everything is built before anything runs, in the phases below, each a
// method of daemon; if a phase fails, what the phases before it opened is
// released (daemon.release) and nothing has run.
func runDaemon(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	log.Info().Str("version", buildVersion()).Str("home", cfg.Home).Msg("bridged starting")
	// The daemon is idle most of its life with a live heap of a few MB: half
	// the runtime's default headroom keeps its resident memory low for a
	// collection cost it barely notices. An owner's GOGC wins.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(50)
	}
	d := &daemon{cfg: cfg, log: log, instance: newInstanceID()}
	defer d.release()
	for _, phase := range []func(context.Context) error{
		d.openHome,      // the home, the store; a second daemon stops here
		d.openDocker,    // the engine, the agent image, the mount allowlist
		d.buildIntake,   // the outbox signal, approvals, /remote-control, the ingest
		d.buildChannels, // local and WhatsApp, and the media pool behind them
		d.buildServices, // turn ends, owner alerts and budgets, the credential proxy
		d.buildRuns,     // the router, the scheduler, the IPC host, the proxy's TCP channel
		d.listen,        // the control socket and the dashboard
		d.recover,       // what a previous daemon left
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return d.serve(ctx)
}

// daemon is the running daemon's parts. runDaemon builds it phase by phase;
// each phase fills the fields it names from those of the phases before it.
type daemon struct {
	cfg      *config.Config
	log      zerolog.Logger
	instance string
	// closers are released in reverse by release: what each phase opened.
	closers []func()

	// openHome
	hm         *home.Home
	uid, gid   int
	db         *store.DB
	floor      home.Floor
	firstStart bool
	// openDocker
	docker  *container.Docker     // nil on the kubernetes engine
	kube    *container.Kubernetes // the kubernetes engine (openKube)
	kubeIP  string                // the daemon Pod's IP: the proxy's address for the agents
	runtime container.Runtime     // docker or kube
	engine  container.EngineInfo
	// groupUIDs gives each group's agent its own uid (a root daemon).
	groupUIDs *home.GroupUIDs
	allow     *container.Allowlist
	// buildIntake
	outSignal  *outbox.Signal
	poster     outbox.Poster
	approver   *approvals.Service
	remote     *remotecontrol.Service
	mediaQueue *media.Queue
	ing        *ingest.Ingest
	// buildChannels
	loc       *local.Channel
	wa        *whatsapp.Client
	tg        *telegram.Client // nil without a bot token
	channels  []channel.Channel
	mediaPool *media.Pool
	// buildServices
	turnEnds *turns.Hub
	snaps    *snapshot.Service
	al       *alerts.Alerts
	proxy    *credproxy.Proxy
	// buildRuns
	proxyTCP *credproxy.TCP // the kubernetes engine's Pods reach the proxy and the IPC host here
	rt       *router.Router
	sched    *scheduler.Scheduler
	host     *ipchost.Host
	// listen
	srv     *control.Server
	admin   *control.Admin
	dash    *dashboard.Dashboard
	serving bool
}

// onRelease adds f to what release undoes, after what was added later.
func (d *daemon) onRelease(f func()) { d.closers = append(d.closers, f) }

// release undoes what the phases opened, the last first.
func (d *daemon) release() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// openHome prepares the home (hm is the one door into the agent-writable
// trees: the router, the IPC host and the media pool all go through it, and
// its incidents show in status), opens the store, and stops a second
// daemon of the same home before it opens the WhatsApp device store or
// touches the first one's containers.
func (d *daemon) openHome(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	hm, err := home.New(cfg.Home, log)
	if err != nil {
		return err
	}
	if err := prepareHome(hm, cfg.AssistantName, log); err != nil {
		return err
	}
	d.hm = hm
	d.uid, d.gid = containerUser(cfg, log)
	// Below the free-space floor no file is taken in: outgoing files are
	// not staged, media are not downloaded; the owner's alert says why.
	d.floor = home.Floor{Dir: cfg.Home, Min: uint64(cfg.MinFree)}
	d.firstStart = !exists(cfg.StoreDB())
	if d.db, err = store.Open(ctx, cfg.StoreDB(), log); err != nil {
		return err
	}
	d.onRelease(func() { d.db.Close() })
	if err := control.CheckNotRunning(cfg.Socket()); err != nil {
		return err
	}
	return greetFirstStart(ctx, d.db, cfg, d.firstStart, log)
}

// openDocker connects to the Docker engine, checks the agent image is
// there, and loads the mount allowlist.
func (d *daemon) openDocker(ctx context.Context) error {
	cfg := d.cfg
	if cfg.Engine == container.EngineKubernetes {
		return d.openKube(ctx)
	}
	// Links a start cut short left there lead only where its mounts did.
	links := d.hm.Layout().SourceLinksDir()
	if err := os.RemoveAll(links); err != nil {
		return fmt.Errorf("remove the bind-source links: %w", err)
	}
	docker, err := container.NewDockerWith(d.log, container.DockerOptions{CallTimeout: cfg.EngineTimeout, Engine: cfg.Engine, LinkDir: links})
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	d.docker = docker
	d.runtime = docker
	d.onRelease(func() { docker.Close() })
	if err := checkDocker(ctx, docker, cfg.Image); err != nil {
		return err
	}
	if d.engine, err = docker.Info(ctx); err != nil {
		return err
	}
	// Each group's agent runs as a uid of its own, from
	// BRIDGED_CONTAINER_UID up, which its directories are given to (a root
	// daemon) or granted to by ACL (a daemon that is not root: a rootless
	// engine's user, or a `docker` group member, whose containers' mounts
	// are confirmed from their runners' reports; docs/decisions.md,
	// records 33 and 44).
	if err := d.openGroupUIDs(); err != nil {
		return err
	}
	if cfg.MountAllowlist != "" {
		allow, err := container.LoadAllowlist(cfg.MountAllowlist, cfg.Home, cfg.EnvFile)
		if err != nil {
			return err
		}
		d.allow = allow.WithMasks(d.hm.Layout()) // hide .ssh, .env, … inside allowed mounts
	}
	return nil
}

// openGroupUIDs gives each group a uid of its own where the daemon can
// give or grant the group's directories to it: a root daemon gives them
// away; one that is not grants them by POSIX ACLs, which the home's file
// system must take. Where it does not, every agent runs as the daemon's
// uid, with a warning (and one in doctor).
func (d *daemon) openGroupUIDs() error {
	if os.Geteuid() != 0 {
		if err := home.ACLSupported(d.hm.Layout().DataDir()); err != nil {
			d.log.Warn().Err(err).Int("uid", os.Geteuid()).
				Msg("every agent runs as the daemon's own uid: the home's file system takes no POSIX ACLs, by which a daemon that is not root grants each group's uid its directories")
			return nil
		}
	}
	var err error
	d.groupUIDs, err = home.OpenGroupUIDs(d.hm.Layout(), d.cfg.ContainerUID)
	return err
}

// buildIntake builds the ingest and what it answers before storage. Ingest
// is built first: it stores what the channels receive and wakes the
// router, so the channels, the media pool and the router all take it at
// construction. Approvals are answered in the main chat before storage:
// the ingest takes them out; they post through the outbox, whose sender
// wakes on the signal built here. So is the owner's /remote-control
// (internal/remotecontrol).
func (d *daemon) buildIntake(context.Context) error {
	cfg, log, db := d.cfg, d.log, d.db
	d.mediaQueue = media.NewQueue()
	lateWindow := cfg.LateWindow
	if lateWindow <= 0 {
		lateWindow = router.DefaultLateWindow
	}
	d.outSignal = outbox.NewSignal()
	d.poster = outbox.NewPoster(db, d.outSignal)
	d.approver = approvals.New(db, d.poster, cfg.ApprovalTimeout, log)
	remote, err := remotecontrol.New(remotecontrol.Config{
		Enabled: cfg.RemoteControl, CLI: cfg.RemoteControlCLI, Dir: d.hm.Layout().RemoteControlDir(), Env: os.Environ(),
		Groups: db.Groups, Post: d.poster, Log: log,
	})
	if err != nil {
		return err
	}
	d.remote = remote
	d.onRelease(remote.Close)
	d.ing, err = ingest.New(ingest.Config{
		DB: db, ChannelOf: channelOf, Media: d.mediaQueue, LateWindow: lateWindow, Now: time.Now,
		Log: log.With().Str("component", "ingest").Logger(),
		Answers: func(ctx context.Context, m channel.Message) bool {
			return d.approver.Answer(ctx, m) || remote.Take(ctx, m) || d.chatUndo(ctx, m)
		},
	})
	return err
}

// buildChannels builds the local channel and WhatsApp, which deliver to the
// ingest (nothing connects before serve), and the pool that fetches the
// media of inbound messages after the message is stored: it takes them
// from the ingest's queue and tells the ingest when a chat's media settled.
func (d *daemon) buildChannels(ctx context.Context) error {
	cfg, log, db, hm := d.cfg, d.log, d.db, d.hm
	d.loc = local.New(db, cfg.AssistantName, d.ing.InboundSeen, log).KeepFiles(hm.Layout().LocalFilesDir(),
		local.KeepLimits{Files: cfg.LocalFiles, Bytes: cfg.LocalFilesBytes})
	wa, err := whatsapp.New(ctx, whatsapp.Options{
		Sink:          waSink{in: d.ing, db: db},
		StorePath:     cfg.WhatsAppDB(),
		AssistantName: cfg.AssistantName,
		SharedNumber:  !cfg.OwnNumber,
		AlwaysOnline:  cfg.AlwaysOnline,
		Log:           log,
	})
	if err != nil {
		return err
	}
	d.wa = wa
	d.onRelease(func() { wa.Close() })
	d.channels = []channel.Channel{d.loc, wa}
	if err := d.buildTelegram(); err != nil {
		return err
	}

	var transcriber media.Transcriber
	if cfg.TranscribeURL != "" {
		transcriber = &transcribe.Client{URL: cfg.TranscribeURL, Key: cfg.TranscribeKey, Model: cfg.TranscribeModel}
	}
	fetchers := map[string]media.Fetcher{whatsapp.ChannelName: wa, media.SourceUpload: media.Uploads{Spool: hm.Uploads(), Log: log}}
	if d.tg != nil {
		fetchers[telegram.ChannelName] = d.tg
	}
	d.mediaPool, err = media.New(media.Config{MaxBytes: cfg.MaxMediaBytes, Floor: d.floor}, media.Deps{
		Store: db, Home: hm, Transcriber: transcriber, Log: log, Queue: d.mediaQueue, Settled: d.ing.MediaSettled,
		Fetchers: fetchers,
	})
	return err
}

// buildTelegram builds the Telegram channel when a bot token is given (the
// env file's, else the one `bridged login telegram` stored): it delivers
// to the ingest, each update committed with its offset.
func (d *daemon) buildTelegram() error {
	cfg := d.cfg
	token := cfg.TelegramToken
	if token == "" {
		var err error
		if token, err = telegram.StoredToken(cfg.TelegramTokenFile()); err != nil {
			return err
		}
	}
	if token == "" {
		return nil
	}
	tg, err := telegram.New(telegram.Options{
		Token: token, APIURL: cfg.TelegramAPIURL, Owner: cfg.TelegramOwner, AssistantName: cfg.AssistantName,
		Sink: telegram.StoreSink{In: d.ing, DB: d.db}, Log: d.log,
	})
	if err != nil {
		return err
	}
	d.tg = tg
	d.onRelease(tg.Wait) // its goroutines end with serve's context
	d.channels = append(d.channels, tg)
	return nil
}

// buildServices builds what the router consults: the turns hub, whose ends
// are recorded in the store for `bridged why`; the owner's alerts and
// budgets, which post their notices through the outbox's signal and the
// ingest, both built before, so nothing is wired afterwards; and the
// credential proxy, which is the meter: its responses go to the usage
// ledger, and a group at its budget is refused there.
func (d *daemon) buildServices(context.Context) error {
	cfg, log, db := d.cfg, d.log, d.db
	rec := turns.NewRecorder(func(ctx context.Context, e turns.End) error {
		return db.Turns.Add(ctx, store.TurnEnd{Chat: store.ChatID(e.Chat), Upto: store.MessageID(e.Upto), Result: string(e.Result),
			Reason: e.Reason, Attempt: e.Attempt, Attempts: e.Attempts, At: e.At})
	}, log)
	d.onRelease(rec.Stop)
	d.turnEnds = turns.New(time.Now, rec.Add)
	d.snaps = snapshot.New(snapshot.Config{Dir: d.hm.Layout().SnapshotsDir(), MaxFile: cfg.SnapshotMaxFile, Tell: tellOwner(db, d.poster, log)},
		db, d.hm, log.With().Str("component", "snapshot").Logger())
	d.onRelease(d.snaps.Close)
	al, err := alerts.New(alerts.Config{
		DB: db, State: filepath.Join(d.hm.Layout().StoreDir(), "alerts.json"), Home: cfg.Home,
		Timezone: cfg.Timezone, Channels: d.channels, Log: log, MinFree: uint64(cfg.MinFree),
		Poster: notices{Poster: d.poster, in: d.ing},
	})
	if err != nil {
		return err
	}
	d.al = al
	if d.proxy, err = newAPIProxy(cfg, d.hm.Layout(), meterLedger{alerts.NewMeter(al)}, log); err != nil {
		return err
	}
	return nil
}

// buildRuns builds what runs the agents: the router (with the group queue
// and the runs it owns), the scheduler that hands it due tasks, the IPC
// host that carries out what the agents ask, and, on the kubernetes
// engine, the TCP channel the Pods reach the proxy and the IPC host on.
func (d *daemon) buildRuns(context.Context) error {
	cfg, log, db, approver := d.cfg, d.log, d.db, d.approver
	rt, err := router.New(router.Config{
		AssistantName:    cfg.AssistantName,
		Timezone:         cfg.Timezone,
		PromptCap:        cfg.PromptCap,
		LateWindow:       cfg.LateWindow,
		IdleTimeout:      cfg.IdleTimeout,
		ContainerTimeout: cfg.ContainerTimeout,
		StartTimeout:     cfg.StartTimeout,
		TaskCloseDelay:   taskCloseDelay,
		MaxContainers:    cfg.MaxContainers,
		RetryDelays:      cfg.RetryDelays(),
		TaskMaxFailures:  cfg.TaskMaxFailures,
		Instance:         d.instance,
		Home:             d.hm,
		Container: container.SpecBuilder{
			Image:  cfg.Image,
			Limits: container.Limits{MemoryBytes: cfg.MemoryBytes, CPUs: cfg.CPUs, Pids: cfg.Pids, NoFile: cfg.ContainerNoFile},
			UID:    d.uid, GID: d.gid, GroupUIDs: d.groupUIDs, UIDMap: d.engine.UIDMap, GIDMap: d.engine.GIDMap,
			Allowlist: d.allow, Secrets: cfg.Secrets, APIProxy: proxyAdapter{d.proxy}, Network: cfg.ContainerNetwork,
		},
	}, router.Deps{Store: db, Runtime: d.runtime, Channels: d.channels, Log: log, Now: time.Now, Turns: d.turnEnds, Budget: d.al, Alerts: d.al, Ingest: d.ing,
		OutboxSignal: d.outSignal, ContainerGone: func(ctx context.Context, f store.Folder) { approver.ContainerGone(ctx, string(f)) },
		ApprovalWait: func(f store.Folder, toolUseID, tool string) { approver.Announce(string(f), toolUseID, tool) },
		Snapshots:    d.snaps})
	if err != nil {
		return err
	}
	d.rt = rt
	d.sched = scheduler.New(db, rt, cfg.Timezone, log, time.Now)
	d.host, err = ipchost.New(ipchost.Config{
		Home: cfg.Home, Trees: d.hm, Timezone: cfg.Timezone, AssistantName: cfg.AssistantName,
		Files: ipchost.FileLimits{PerMinute: cfg.OutboxFilesPerMinute, BytesPerDay: cfg.OutboxBytesPerDay}, Floor: d.floor,
		MaxTasks: cfg.MaxTasks, MaxTaskPrompt: cfg.MaxTaskPrompt, Approver: approver, Live: liveFolders(rt),
	}, db, rt, d.sched, waRefresher{d.wa}, log)
	if err != nil {
		return err
	}
	return d.listenProxyTCP()
}

// listen binds the control socket and the dashboard: on the control
// socket, and on BRIDGED_DASHBOARD's loopback address when set (a taken
// port fails the start). The socket is bound before recover: it is what
// stops a second daemon of this home (Listen fails on a socket that
// answers) before that one stops this one's containers. Clients that
// connect meanwhile wait for serve. If the start fails before serve, the
// socket is released and its file removed.
func (d *daemon) listen(context.Context) error {
	cfg, log, hm := d.cfg, d.log, d.hm
	uploads := hm.Uploads()
	admin := &control.Admin{DB: d.db, AssistantName: cfg.AssistantName, Timezone: cfg.Timezone, CheckMounts: mountChecker(d.allow),
		Snapshots: d.snaps, Idle: d.rt.Idle}
	d.admin = admin
	srv, err := control.Listen(control.Options{
		Uploads:   &uploads,
		MaxUpload: cfg.MaxMediaBytes,
		Socket:    cfg.Socket(),
		Admin:     admin,
		Local:     d.loc,
		Turns:     d.turnEnds,
		Holds:     d.rt,
		Status:    liveStatus{d.rt, d.proxy},
		Channels:  d.channels,
		Groups:    groupsChanged{d.host, d.rt},
		Tasks:     d.sched,
		Config:    daemonConfig{cfg, d.proxy},
		Approvals: d.approver,
		Dashboard: func(srv *control.Server) (control.Dashboard, error) {
			dash, err := dashboard.New(dashboard.Options{
				Source:    srv,
				Admin:     admin,
				Approvals: dashboard.ServiceApprovals(d.approver),
				Wait:      d.loc.Wait,
				Addr:      cfg.Dashboard,
				PathFile:  filepath.Join(hm.Layout().StoreDir(), "dashboard-path"),
				Log:       log,
			})
			d.dash = dash
			return dash, err
		},
		Version:  buildVersion(),
		Instance: d.instance,
		Log:      log,
	})
	if err != nil {
		return err
	}
	d.srv = srv
	d.onRelease(func() {
		if d.serving {
			return // their Run closed them
		}
		_ = srv.Close()
		if d.dash != nil {
			_ = d.dash.Close()
		}
	})
	return nil
}

// recover deals with what a previous daemon left (recoverStart), settles
// the approvals it left open, and returns the heap building everything
// freed: migrations, the WhatsApp store, the image check and the leftover
// sweep leave freed heap the runtime would hand back only slowly; the
// daemon, idle most of its life, should not hold it.
func (d *daemon) recover(ctx context.Context) error {
	if err := recoverStart(ctx, d.runtime, d.hm.Layout().Dir, d.instance, d.host, d.sched, d.log); err != nil {
		return err
	}
	if err := settleApprovals(ctx, d.db, d.approver, d.poster, d.log); err != nil {
		return err
	}
	// Turns a kill cut off are ended with what their files are now, and
	// an undo cut off is finished.
	if err := d.snaps.Recover(ctx); err != nil {
		d.log.Error().Err(err).Msg("cannot finish the snapshots a previous daemon left open")
	}
	debug.FreeOSMemory()
	return nil
}

// serve runs every part until ctx ends or one fails, then drains: the
// control API outlives the router's drain, so a `chat -m` waiting for a
// turn the drain finishes gets its reply.
func (d *daemon) serve(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	g, gctx := errgroup.WithContext(ctx)
	d.serving = true // from here Run closes the control server and the dashboard
	srvCtx, srvStop := context.WithCancel(context.WithoutCancel(gctx))
	defer srvStop()
	g.Go(func() error { return d.srv.Run(srvCtx) })
	g.Go(func() error { return d.dash.Run(srvCtx) })
	g.Go(func() error {
		defer srvStop()
		return d.rt.Run(gctx)
	})
	g.Go(func() error { return d.mediaPool.Run(gctx) })
	g.Go(func() error { return d.sched.Run(gctx) })
	g.Go(func() error { return d.host.Run(gctx) })
	g.Go(func() error {
		return (&retention.Pruner{DB: d.db, Outbox: d.db.Outbox, Sessions: d.db.Sessions, Files: d.hm.Spool(), Keep: cfg.Retention, Log: log,
			Trees: d.hm, LogKeep: cfg.LogRetention, InboxKeep: cfg.InboxRetention, Changes: snapPruner{d.snaps}}).Run(gctx)
	})
	g.Go(func() error { return d.al.Run(gctx) })
	if cfg.MemorySummary == snapshot.SummaryWeekly {
		w := &snapshot.Weekly{S: d.snaps, Now: time.Now, Loc: cfg.Timezone, Wake: d.outSignal.Wake}
		g.Go(func() error { return w.Run(gctx) })
	}
	for _, ch := range d.channels {
		g.Go(func() error {
			if err := ch.Connect(gctx); err != nil && gctx.Err() == nil {
				return fmt.Errorf("connect %s: %w", ch.Name(), err)
			}
			return nil
		})
	}
	log.Info().Str("instance", d.instance).Str("socket", cfg.Socket()).Msg("bridged running")
	sd := newSystemd(cfg, d.db, d.rt, d.wa, log)
	sd.start(ctx)
	err := g.Wait()
	sd.stop()
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	if err != nil {
		return err
	}
	log.Info().Msg("bridged stopped")
	return nil
}

// snapPruner is the retention's view of the snapshots.
type snapPruner struct{ s *snapshot.Service }

func (p snapPruner) Prune(ctx context.Context, before time.Time) (int, int, error) {
	n, err := p.s.Prune(ctx, before)
	return n.Changes, n.Objects, err
}

// chatUndo takes the owner's /undo in the main chat (control.Admin.ChatUndo)
// and posts its answer there. Messages arrive once the daemon serves, when
// the admin is built.
func (d *daemon) chatUndo(ctx context.Context, m channel.Message) bool {
	if d.admin == nil {
		return false
	}
	reply, ok := d.admin.ChatUndo(ctx, m)
	if ok {
		tellOwner(d.db, d.poster, d.log)(ctx, reply)
	}
	return ok
}

// Package config resolves bridged's configuration (DESIGN §3).
//
// Every setting has a flag and an environment variable of the same meaning
// (BRIDGED_<NAME>); the variables may also come from an env file (--env-file,
// default ./.env when present). Precedence: flag, then process environment,
// then env file, then default. An invalid value is an error naming the
// variable; nothing falls back silently. The env file read is kept as an
// absolute path (Config.EnvFile), so that a running daemon names it whatever
// directory a command asks from; a BRIDGED_ variable the env file holds that
// is no setting is named in Config.Unknown with the nearest setting.
//
// The Claude credentials (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN) are read
// from the same places, kept in Config.Secrets, and masked whenever the
// configuration is printed. Only the daemon's credential proxy uses them; they
// never enter a container.
//
// Voice transcription is off unless BRIDGED_TRANSCRIBE_URL is set (the base URL
// of an OpenAI-compatible endpoint; /v1/audio/transcriptions is appended).
// BRIDGED_TRANSCRIBE_KEY is a secret like the Claude credentials: read from the
// environment or the env file only (never a flag, which other users see in the
// process list), masked when printed, used by the daemon only.
package config

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/approvals"
	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/credproxy"
	"github.com/bridged-app/bridged/internal/dashboard"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipchost"
	"github.com/bridged-app/bridged/internal/media"
	"github.com/bridged-app/bridged/internal/remotecontrol"
	"github.com/bridged-app/bridged/internal/retention"
	"github.com/bridged-app/bridged/internal/router"
	"github.com/bridged-app/bridged/internal/rules"
	bounds "github.com/bridged-app/bridged/internal/setting"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/transcribe"
)

// Secret variable names. They are never written anywhere by bridged.
const (
	EnvAPIKey     = "ANTHROPIC_API_KEY"
	EnvOAuthToken = "CLAUDE_CODE_OAUTH_TOKEN"
	// EnvTranscribeKey is the bearer token of the transcription endpoint.
	EnvTranscribeKey = "BRIDGED_TRANSCRIBE_KEY"
	// EnvTelegramToken is the Telegram bot's token (BotFather's).
	EnvTelegramToken = "BRIDGED_TELEGRAM_TOKEN"
)

// Config is the effective configuration.
type Config struct {
	Home             string
	EnvFile          string // the env file that was read, "" if none
	AssistantName    string
	OwnNumber        bool
	AlwaysOnline     bool // WhatsApp: available whenever connected, not only while an agent works
	Timezone         *time.Location
	MaxContainers    int
	IdleTimeout      time.Duration
	ContainerTimeout time.Duration
	// RemoteControl turns on /remote-control in the main chat: the owner's
	// own message starts a host-level `claude remote-control` session
	// (RemoteControlCLI) and gets its link back.
	RemoteControl    bool
	RemoteControlCLI string
	// ApprovalTimeout is how long a tool call waits for the owner's
	// approval before it is denied.
	ApprovalTimeout time.Duration
	Image           string
	MemoryBytes     int64
	CPUs            float64
	Pids            int64
	LogLevel        string
	LogFormat       string // auto, console, json
	MountAllowlist  string
	PromptCap       int
	LateWindow      time.Duration // a message arriving later than this after it was sent starts no turn
	RetryBase       time.Duration
	EngineTimeout   time.Duration // deadline of each Docker Engine API call
	StartTimeout    time.Duration // a container that prints nothing this long after its start is stopped as hung
	// AnthropicURL is the upstream of the credential proxy (the Anthropic
	// API, a corporate gateway or a compatible endpoint).
	AnthropicURL string
	// ContainerNetwork is the containers' network mode: "bridge" or "none"
	// (no network; the agent still reaches Claude through the proxy socket).
	ContainerNetwork string
	// Engine is the container engine expected behind the Engine API
	// (BRIDGED_ENGINE): docker, podman, or "" (whichever answers).
	Engine container.Engine
	// The kubernetes engine (docs/kubernetes.md): the agents' namespace
	// (empty: the daemon's own), the claim the home is on, the daemon's
	// own Pod (owner of the agents' Pods, and its IP the proxy's address),
	// and where the proxy listens for them over TCP.
	KubeNamespace, KubeClaim, KubePod, ProxyListen string
	// What one container can make the credential proxy and the host hold
	// (docs/security.md, "Limits"): connections open at once on its proxy
	// socket, its group's API requests in flight, the largest request body,
	// how long a request's headers and body may take to arrive, how long a
	// connection may idle (or a response wait for its reader); and the
	// container's open-file limit (its nofile ulimit, soft and hard).
	ProxyMaxConns, ProxyMaxInFlight    int
	ProxyMaxBody                       int64
	ProxyReadTimeout, ProxyIdleTimeout time.Duration
	ContainerNoFile                    int64
	// ContainerUID and ContainerGID are the uid:gid containers run as when
	// the daemon runs as root (DefaultContainerID unless set). A daemon that
	// is not root runs containers as its own uid:gid and ignores them;
	// ContainerIDSet says whether either was set explicitly.
	ContainerUID, ContainerGID int
	ContainerIDSet             bool
	// Retention is how long answered messages, sent outbox rows, finished
	// task runs and raw usage rows are kept; 0 keeps them forever.
	Retention time.Duration
	// TranscribeURL is the transcription endpoint's base URL; "" turns
	// transcription off. TranscribeModel is the model it is asked for and
	// TranscribeKey its bearer token ("" for a local server that needs none).
	TranscribeURL, TranscribeModel, TranscribeKey string
	// TelegramToken is the bot token from the environment or the env file
	// ("" when none: the one `bridged login telegram` stored is used);
	// TelegramOwner the owner's Telegram user id (0: none);
	// TelegramAPIURL the Bot API's address.
	TelegramToken  string
	TelegramOwner  int64
	TelegramAPIURL string
	// MaxMediaBytes is the largest media file taken in: fetched from
	// WhatsApp or attached to a message posted through the control API.
	MaxMediaBytes int64
	// SnapshotMaxFile: a file of a group's folder or memory larger than
	// this is recorded by each turn's snapshot by size and hash only.
	SnapshotMaxFile int64
	// MemorySummary: "weekly" posts to the main chat, each Monday at
	// 09:00, what each agent's memory gained and lost that week; "off"
	// (the default) does not.
	MemorySummary string
	// Disk: what a group can make the daemon keep on disk. OutboxFilesPerMinute
	// and OutboxBytesPerDay cap the files each group stages for sending (in
	// any 60 s, in any 24 h); MinFree is the free space the home's disk
	// keeps (below it no outgoing file is staged, no media downloaded, and
	// the owner is alerted); LogRetention and InboxRetention are how long run
	// logs and inbox files are kept (0 forever).
	OutboxFilesPerMinute int
	OutboxBytesPerDay    int64
	// LocalFiles and LocalFilesBytes cap the files one local chat keeps
	// delivered (data/local/): past either, a file is not delivered and
	// its message says so.
	LocalFiles                   int
	LocalFilesBytes              int64
	MinFree                      int64
	LogRetention, InboxRetention time.Duration

	// Scheduled tasks' limits: MaxTasks is the most tasks a group may have
	// that are not done (active, running or paused); MaxTaskPrompt the
	// largest task prompt in bytes; TaskMaxFailures how many failed runs in
	// a row pause a task (with one owner alert).
	MaxTasks        int
	MaxTaskPrompt   int
	TaskMaxFailures int
	// Dashboard is the loopback address the web dashboard listens on
	// besides the control socket ("" = the socket only).
	Dashboard string
	// Secrets holds the Claude credentials that were found, by variable name.
	Secrets map[string]string
	// Ignored lists the invalid values of daemon-only settings that
	// ResolveClient replaced with their defaults.
	Ignored []string
	// Warnings are what was resolved other than asked without being an
	// error: an inherited TZ Go cannot load, replaced by the system's zone
	// or UTC. The daemon logs them at start; doctor and config show them.
	Warnings []string
	// Unknown names the BRIDGED_ variables of the env file that are no
	// setting, each with the nearest one when there is one (see
	// UnknownVariables); the commands add the environment's.
	Unknown []string
	// Given holds the variables whose value a flag, the environment or
	// the env file gave (the credentials when set); the others are
	// defaults.
	Given map[string]bool
}

// DefaultContainerID is the uid and gid containers run as when the daemon
// runs as root and none is configured: a dedicated id above the ranges login
// users (1000–60000 by default in login.defs) and system users are given
// from, so no login user ends up owning the agents' workspaces.
const DefaultContainerID = 61000

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid configuration")

type setting struct {
	name  string // flag name
	env   string // BRIDGED_… variable
	def   func() string
	usage string
}

var settings = []setting{
	{"home", "BRIDGED_HOME", constant(""), "directory holding all state (default $XDG_DATA_HOME/bridged, i.e. ~/.local/share/bridged)"},
	{"assistant-name", "BRIDGED_ASSISTANT_NAME", constant("Andy"), "the assistant's name; the trigger is @<name>"},
	{"own-number", "BRIDGED_OWN_NUMBER", constant("false"), "the assistant has its own WhatsApp number (no name prefix on replies)"},
	{"whatsapp-always-online", "BRIDGED_WHATSAPP_ALWAYS_ONLINE", constant("false"), "show the WhatsApp account online whenever connected, not only while an agent works (online, WhatsApp sends the phone no notifications: for a number bridged uses alone)"},
	{"timezone", "BRIDGED_TIMEZONE", systemTimezone, "IANA timezone for prompts and cron schedules"},
	{"max-containers", "BRIDGED_MAX_CONTAINERS", constant("5"), "containers running at once"},
	{"idle-timeout", "BRIDGED_IDLE_TIMEOUT", constant("30m"), "close a container this long after its last result"},
	{"approval-timeout", "BRIDGED_APPROVAL_TIMEOUT", constant("10m"), "deny a tool call the owner has not approved within this long"},
	{"remote-control", "BRIDGED_REMOTE_CONTROL", constant("false"), "the owner's /remote-control in the main chat starts a claude remote-control session on this machine and sends its link back"},
	{"remote-control-cli", "BRIDGED_REMOTE_CONTROL_CLI", constant("claude"), "the claude CLI /remote-control runs on this machine (a path, or a name looked up in PATH)"},
	{"container-timeout", "BRIDGED_CONTAINER_TIMEOUT", constant(""), "stop a container that printed nothing for this long (default: 30m, at least idle timeout + 30s)"},
	{"image", "BRIDGED_IMAGE", constant("bridged-agent:latest"), "agent container image"},
	{"container-memory", "BRIDGED_CONTAINER_MEMORY", constant("2g"), "memory limit per container (e.g. 512m, 2g; 0 = none)"},
	{"container-cpus", "BRIDGED_CONTAINER_CPUS", constant("2"), "CPU limit per container (0 = none)"},
	{"container-pids", "BRIDGED_CONTAINER_PIDS", constant("512"), "process limit per container (0 = none)"},
	{"log-level", "BRIDGED_LOG_LEVEL", constant("info"), "debug, info, warn or error"},
	{"log-format", "BRIDGED_LOG_FORMAT", constant("auto"), "auto (console on a TTY, JSON otherwise), console or json"},
	{"mount-allowlist", "BRIDGED_MOUNT_ALLOWLIST", defaultAllowlist, "mount allowlist file (outside the home directory)"},
	{"prompt-cap", "BRIDGED_PROMPT_CAP", constant("200"), "most messages in one prompt (oldest dropped with a note)"},
	{"retry-base", "BRIDGED_RETRY_BASE", constant("5s"), "first retry delay of a failed run; it doubles for each of the five retries"},
	// Late backlog: a message that arrives this long after it was sent is
	// kept as context but its trigger starts no turn.
	{"late-window", "BRIDGED_LATE_WINDOW", constant("10m"), "a message arriving more than this after it was sent (a backlog after a disconnect) is kept as context but starts no turn"},
	// Scheduled tasks' limits.
	{"max-tasks", "BRIDGED_MAX_TASKS", constant("50"), "most scheduled tasks a group may have that are not done (active or paused); schedule_task past it is refused"},
	{"max-task-prompt", "BRIDGED_MAX_TASK_PROMPT", constant("16k"), "largest scheduled task prompt (e.g. 16k; at most 64k)"},
	{"task-max-failures", "BRIDGED_TASK_MAX_FAILURES", constant("5"), "failed runs in a row after which a task pauses itself, with one owner alert (bridged tasks resume restarts it)"},
	{"engine", "BRIDGED_ENGINE", constant(""), "container engine: docker, or podman (rootless; its socket is DOCKER_HOST, else $XDG_RUNTIME_DIR/podman/podman.sock); empty: whichever answers on DOCKER_HOST"},
	{"kube-namespace", "BRIDGED_KUBE_NAMESPACE", constant(""), "kubernetes engine: the namespace of the agents' Pods (empty: the daemon's own, from its service account)"},
	{"kube-claim", "BRIDGED_KUBE_CLAIM", constant(""), "kubernetes engine: the PersistentVolumeClaim the home is on; each agent Pod mounts its group's directories from it by sub-path (required with that engine)"},
	{"kube-pod", "BRIDGED_KUBE_POD", constant(""), "kubernetes engine: the daemon's own Pod (from the downward API): it owns the agents' Pods, and its IP is where they reach the credential proxy"},
	{"proxy-listen", "BRIDGED_PROXY_LISTEN", constant(""), "kubernetes engine: where the credential proxy listens for the agents' Pods over TCP (default :7431 with that engine; unused by the others)"},
	{"engine-timeout", "BRIDGED_ENGINE_TIMEOUT", constant("30s"), "deadline of each Docker Engine API call (create, attach, start, stop, remove, …); a hung engine fails the run"},
	{"start-timeout", "BRIDGED_START_TIMEOUT", constant("2m"), "a container that prints nothing this long after it started is stopped as hung (retried once, then reported)"},
	{"anthropic-url", "BRIDGED_ANTHROPIC_URL", constant("https://api.anthropic.com"), "the Claude API the daemon's credential proxy forwards to (a gateway or compatible endpoint works too)"},
	{"container-network", "BRIDGED_CONTAINER_NETWORK", constant("bridge"), "containers' network: bridge, or none (no network at all; Claude is still reached through the proxy)"},
	// What one container can make the daemon hold through its proxy socket,
	// and its own open files.
	{"proxy-max-conns", "BRIDGED_PROXY_MAX_CONNS", constant("64"), "connections open at once on one container's API proxy socket; one more is closed at once"},
	{"proxy-max-inflight", "BRIDGED_PROXY_MAX_INFLIGHT", constant("32"), "a group's Claude API requests forwarded at once; one more is answered 429"},
	{"proxy-max-body", "BRIDGED_PROXY_MAX_BODY", constant("32m"), "largest Claude API request body forwarded; a larger one is answered 413"},
	{"proxy-read-timeout", "BRIDGED_PROXY_READ_TIMEOUT", constant("1m"), "an API request's headers, then its body, must reach the proxy within this"},
	{"proxy-idle-timeout", "BRIDGED_PROXY_IDLE_TIMEOUT", constant("2m"), "a proxy connection idle this long (or whose reader takes nothing of a response this long) is closed"},
	{"container-nofile", "BRIDGED_CONTAINER_NOFILE", constant("4096"), "open files per container (its nofile ulimit, soft and hard)"},
	{"container-uid", "BRIDGED_CONTAINER_UID", constant(""), "uid containers run as when the daemon runs as root (default 61000; a non-root daemon uses its own)"},
	{"container-gid", "BRIDGED_CONTAINER_GID", constant(""), "gid containers run as when the daemon runs as root (default 61000; a non-root daemon uses its own)"},
	{"transcribe-url", "BRIDGED_TRANSCRIBE_URL", constant(""), "OpenAI-compatible transcription endpoint for voice notes, e.g. https://api.openai.com (empty = off)"},
	{"transcribe-model", "BRIDGED_TRANSCRIBE_MODEL", constant("whisper-1"), "model asked of the transcription endpoint"},
	{"max-media-bytes", "BRIDGED_MAX_MEDIA_BYTES", constant("20m"), "largest media file taken in, from WhatsApp or attached with bridged chat --attach (e.g. 20m, 100m)"},
	{"snapshot-max-file", "BRIDGED_SNAPSHOT_MAX_FILE", constant("16m"), "a file of a group's folder or memory larger than this is recorded by each turn's snapshot by size and hash only (so an undo cannot bring it back)"},
	{"memory-summary", "BRIDGED_MEMORY_SUMMARY", constant("off"), "weekly: each Monday at 09:00 (BRIDGED_TIMEZONE) post to the main chat what each agent's memory gained and lost that week; off: do not"},
	{"retention", "BRIDGED_RETENTION", constant("90d"), "prune answered messages, sent outbox rows, task runs, raw usage and session transcripts (the live session's aside) older than this (e.g. 30d, 720h; 0 = keep forever)"},
	// Disk: per-group caps on staged outgoing files, the free-space floor,
	// and the retention of the files kept per run and per message.
	{"outbox-files-per-minute", "BRIDGED_OUTBOX_FILES_PER_MINUTE", constant("60"), "most files one group may send (stage) in any minute"},
	{"outbox-bytes-per-day", "BRIDGED_OUTBOX_BYTES_PER_DAY", constant("2g"), "most bytes of files one group may send (stage) in any 24 hours (e.g. 500m, 2g)"},
	{"local-files", "BRIDGED_LOCAL_FILES", constant("1000"), "most files one local chat keeps delivered in data/local/ (bridged chat's files); past it a file is not delivered and its message says so"},
	{"local-files-bytes", "BRIDGED_LOCAL_FILES_BYTES", constant("2g"), "most bytes of files one local chat keeps delivered in data/local/ (e.g. 500m, 2g)"},
	{"min-free", "BRIDGED_MIN_FREE", constant("1g"), "free space kept on the home's disk: below it no outgoing file is staged, no media downloaded, and the owner is alerted (e.g. 500m, 1g)"},
	{"log-retention", "BRIDGED_LOG_RETENTION", constant("30d"), "prune run logs (data/logs/) older than this (e.g. 14d; 0 = keep forever)"},
	{"telegram-owner", "BRIDGED_TELEGRAM_OWNER", constant(""), "the owner's Telegram user id (digits): their messages count as yours (approvals, /new, allow lists); empty: none"},
	{"telegram-api-url", "BRIDGED_TELEGRAM_API_URL", constant("https://api.telegram.org"), "the Telegram Bot API's address (a local Bot API server works too)"},
	{"dashboard", "BRIDGED_DASHBOARD", constant(""), "loopback address the web dashboard also listens on, e.g. 127.0.0.1:8080 (empty = the control socket only)"},
	{"inbox-retention", "BRIDGED_INBOX_RETENTION", constant("90d"), "prune the media files saved in each group's inbox/ older than this (e.g. 30d; 0 = keep forever)"},
}

func constant(s string) func() string { return func() string { return s } }

func defaultAllowlist() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(h, ".config", "bridged", "mount-allowlist.json")
}

func systemTimezone() string {
	if tz := os.Getenv("TZ"); tz != "" {
		return tz
	}
	return systemZone()
}

// systemZone is the system's zone name: /etc/localtime's link target under
// zoneinfo/, else /etc/timezone, else UTC.
func systemZone() string {
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if i := strings.Index(target, "zoneinfo/"); i >= 0 {
			return target[i+len("zoneinfo/"):]
		}
	}
	if b, err := os.ReadFile("/etc/timezone"); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s
		}
	}
	return "UTC"
}

// Flags holds the raw flag values registered on a FlagSet.
type Flags struct {
	fs      *flag.FlagSet
	values  map[string]*string
	envFile *string
}

// Register adds every setting's flag, and --env-file, to fs.
func Register(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs, values: make(map[string]*string)}
	for _, s := range settings {
		f.values[s.name] = fs.String(s.name, "", fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
	f.envFile = fs.String("env-file", "", "env file to read (default ./.env if present)")
	return f
}

// IsDaemonSetting reports whether name is the flag of one of the daemon's
// settings (every setting but --home): every command accepts them, only
// `bridged run --help` lists them.
func IsDaemonSetting(name string) bool {
	if name == "home" {
		return false
	}
	for _, s := range settings {
		if s.name == name {
			return true
		}
	}
	return false
}

// SettingError is an invalid value of one setting.
type SettingError struct {
	Env, Value, Why string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("%s: %s=%q: %s", ErrInvalid, e.Env, e.Value, e.Why)
}

func (e *SettingError) Unwrap() error { return ErrInvalid }

// clientSettings are the settings the commands other than `bridged run`
// use themselves; every other setting is the daemon's alone.
var clientSettings = map[string]bool{
	"BRIDGED_HOME": true, "BRIDGED_ASSISTANT_NAME": true, "BRIDGED_TIMEZONE": true, "BRIDGED_MOUNT_ALLOWLIST": true,
}

// Resolve computes the configuration from the parsed flags, the environment
// (getenv) and the env file.
func (f *Flags) Resolve(getenv func(string) string) (*Config, error) {
	return f.resolve(getenv, false)
}

// ResolveClient is Resolve for a command that talks to the daemon or its
// database (status, chat, groups, tasks): an invalid value of a setting
// only the daemon uses (BRIDGED_IDLE_TIMEOUT, BRIDGED_IMAGE, …) does not
// stop it; the default stands in and Config.Ignored says what was
// ignored. `bridged run` still refuses the value.
func (f *Flags) ResolveClient(getenv func(string) string) (*Config, error) {
	return f.resolve(getenv, true)
}

func (f *Flags) resolve(getenv func(string) string, client bool) (*Config, error) {
	set := make(map[string]bool)
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	envPath := *f.envFile
	explicit := set["env-file"]
	if !explicit {
		if p := getenv("BRIDGED_ENV_FILE"); p != "" {
			envPath, explicit = p, true
		} else {
			envPath = ".env"
		}
	}
	fileVals, err := ReadEnvFile(envPath)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			fileVals, envPath = nil, ""
		} else {
			return nil, fmt.Errorf("%w: --env-file %s: %v", ErrInvalid, envPath, err)
		}
	}

	raw := make(map[string]string)
	given := make(map[string]bool)
	var warnings []string
	for _, s := range settings {
		switch {
		case set[s.name]:
			raw[s.env], given[s.env] = *f.values[s.name], true
		case getenv(s.env) != "":
			raw[s.env], given[s.env] = getenv(s.env), true
		case fileVals[s.env] != "":
			raw[s.env], given[s.env] = fileVals[s.env], true
		case s.env == "BRIDGED_HOME":
			if raw[s.env], err = DefaultHome(getenv); err != nil {
				return nil, err
			}
		case s.env == "BRIDGED_TIMEZONE":
			var warning string
			if raw[s.env], warning = defaultTimezone(getenv); warning != "" {
				warnings = append(warnings, warning)
			}
		default:
			raw[s.env] = s.def()
		}
	}
	var ignored []string
	c, err := build(raw)
	for range settings {
		var se *SettingError
		if !client || !errors.As(err, &se) || clientSettings[se.Env] {
			break
		}
		for _, st := range settings {
			if st.env == se.Env && raw[se.Env] != st.def() {
				ignored = append(ignored, se.Error())
				raw[se.Env] = st.def()
			}
		}
		c, err = build(raw)
	}
	if err != nil {
		return nil, err
	}
	c.Ignored = ignored
	c.Warnings = warnings
	if envPath != "" {
		// Absolute, so that what the daemon reports names the file
		// whichever directory a command runs in.
		if abs, err := filepath.Abs(envPath); err == nil {
			envPath = abs
		}
		names := make([]string, 0, len(fileVals))
		for k := range fileVals {
			names = append(names, k)
		}
		c.Unknown = UnknownVariables(names, envPath)
	}
	c.EnvFile = envPath
	c.Secrets = make(map[string]string)
	for _, k := range []string{EnvAPIKey, EnvOAuthToken} {
		if v := getenv(k); v != "" {
			c.Secrets[k] = v
		} else if v := fileVals[k]; v != "" {
			c.Secrets[k] = v
		}
		given[k] = c.Secrets[k] != ""
	}
	if c.TranscribeKey = getenv(EnvTranscribeKey); c.TranscribeKey == "" {
		c.TranscribeKey = fileVals[EnvTranscribeKey]
	}
	given[EnvTranscribeKey] = c.TranscribeKey != ""
	if c.TelegramToken = getenv(EnvTelegramToken); c.TelegramToken == "" {
		c.TelegramToken = fileVals[EnvTelegramToken]
	}
	given[EnvTelegramToken] = c.TelegramToken != ""
	c.Given = given
	return c, nil
}

// otherVariables are BRIDGED_ names bridged reads that are no setting of
// the daemon: the env file's own, the secret, and those of the tests.
// Names under otherPrefixes are the agent container's.
var (
	otherVariables = []string{"BRIDGED_ENV_FILE", EnvTranscribeKey, EnvTelegramToken, "BRIDGED_SKIP_DOCKER", "BRIDGED_TEST_IMAGE", "BRIDGED_E2E_SCREENSHOTS"}
	otherPrefixes  = []string{"BRIDGED_AGENT_", "BRIDGED_MCP_"}
)

// UnknownVariables names each BRIDGED_ variable among names that bridged
// does not read, found in where (the env file's path, "the environment"),
// with the nearest setting when one is near: "BRIDGED_DASHBORD (where)
// is not a bridged setting: did you mean BRIDGED_DASHBOARD?". Other names
// are left alone. The result is sorted.
func UnknownVariables(names []string, where string) []string {
	known := make([]string, 0, len(settings)+len(otherVariables))
	for _, s := range settings {
		known = append(known, s.env)
	}
	known = append(known, otherVariables...)
	var out []string
next:
	for _, n := range names {
		if !strings.HasPrefix(n, "BRIDGED_") {
			continue
		}
		for _, k := range known {
			if n == k {
				continue next
			}
		}
		for _, p := range otherPrefixes {
			if strings.HasPrefix(n, p) {
				continue next
			}
		}
		msg := fmt.Sprintf("%s (%s) is not a bridged setting", n, where)
		if near := Nearest(n, known); near != "" {
			msg += ": did you mean " + near + "?"
		} else {
			msg += ": it is ignored (`bridged run --help` lists the settings)"
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

// defaultTimezone is BRIDGED_TIMEZONE's default: the inherited TZ (a
// leading ':' removed), else the system's zone, else UTC. An inherited TZ
// Go cannot load (":/etc/localtime", a POSIX rule such as "IST-2") is not
// the owner's choice of BRIDGED_TIMEZONE: the system's zone, else UTC,
// stands in, with a warning.
func defaultTimezone(getenv func(string) string) (zone, warning string) {
	tz := getenv("TZ")
	if tz == "" {
		return loadableOr(systemZone(), "UTC"), ""
	}
	if name := strings.TrimPrefix(tz, ":"); name != "" && !filepath.IsAbs(name) {
		if _, err := time.LoadLocation(name); err == nil {
			return name, ""
		}
	}
	zone = loadableOr(systemZone(), "UTC")
	return zone, fmt.Sprintf("TZ=%q is not a timezone bridged can load; using %s (the system's zone, else UTC): set BRIDGED_TIMEZONE to an IANA name such as Europe/Berlin to choose", tz, zone)
}

// loadableOr is name when Go can load it, else fallback.
func loadableOr(name, fallback string) string {
	if _, err := time.LoadLocation(name); err != nil || name == "" {
		return fallback
	}
	return name
}

// DefaultHome is the home of every command given neither --home nor
// BRIDGED_HOME: $XDG_DATA_HOME/bridged, ~/.local/share/bridged when
// XDG_DATA_HOME is unset or relative (the XDG base directory rule). The
// same for `bridged run`, `make run` and every other command, so none of
// them needs --home; a systemd unit names its own home with --home. The
// service user install-service creates has that home as its HOME: when
// HOME itself is a bridged home (it holds store/bridged.db) and the XDG
// directory holds none, HOME is the home, so `sudo -u bridged bridged
// status` finds the service's.
func DefaultHome(getenv func(string) string) (string, error) {
	h := getenv("HOME")
	xdg := ""
	if d := getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		xdg = filepath.Join(d, "bridged")
	} else if filepath.IsAbs(h) {
		xdg = filepath.Join(h, ".local", "share", "bridged")
	}
	if filepath.IsAbs(h) && !isFile(filepath.Join(xdg, "store", "bridged.db")) && isFile(filepath.Join(h, "store", "bridged.db")) {
		return filepath.Clean(h), nil
	}
	if xdg != "" {
		return xdg, nil
	}
	return "", fmt.Errorf("%w: neither HOME nor XDG_DATA_HOME is set, so there is no default home: give --home DIR or set BRIDGED_HOME", ErrInvalid)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// build reads raw (every setting's value by variable) into a Config. It
// parses each value and routes it to the package that takes it, which
// says what the value may be (its bounds, internal/setting); an invalid
// value is a SettingError naming its variable, the first one in the order
// of the settings.
func build(raw map[string]string) (*Config, error) {
	c := &Config{}
	r := &reader{raw: raw}
	dir := raw["BRIDGED_HOME"]
	if dir == "" {
		return nil, r.bad("BRIDGED_HOME", "must not be empty")
	}
	var err error
	if c.Home, err = filepath.Abs(dir); err != nil {
		return nil, r.bad("BRIDGED_HOME", err.Error())
	}
	c.AssistantName = raw["BRIDGED_ASSISTANT_NAME"]
	r.check("BRIDGED_ASSISTANT_NAME", rules.CheckAssistantName(c.AssistantName))
	r.bool("BRIDGED_OWN_NUMBER", &c.OwnNumber)
	r.bool("BRIDGED_REMOTE_CONTROL", &c.RemoteControl)
	c.RemoteControlCLI = strings.TrimSpace(raw["BRIDGED_REMOTE_CONTROL_CLI"])
	r.check("BRIDGED_REMOTE_CONTROL_CLI", remotecontrol.CheckCLI(c.RemoteControlCLI))
	r.bool("BRIDGED_WHATSAPP_ALWAYS_ONLINE", &c.AlwaysOnline)
	if c.Timezone, err = time.LoadLocation(raw["BRIDGED_TIMEZONE"]); err != nil {
		r.bad("BRIDGED_TIMEZONE", "unknown timezone")
	}
	number(r, "BRIDGED_MAX_CONTAINERS", &c.MaxContainers, strconv.Atoi, agentrun.Bounds.MaxContainers)
	number(r, "BRIDGED_IDLE_TIMEOUT", &c.IdleTimeout, time.ParseDuration, agentrun.Bounds.IdleTimeout)
	number(r, "BRIDGED_APPROVAL_TIMEOUT", &c.ApprovalTimeout, time.ParseDuration, approvals.TimeoutBound)
	if v := raw["BRIDGED_CONTAINER_TIMEOUT"]; v == "" {
		c.ContainerTimeout = agentrun.ContainerTimeoutFor(c.IdleTimeout)
	} else if c.ContainerTimeout, err = time.ParseDuration(v); err != nil {
		r.bad("BRIDGED_CONTAINER_TIMEOUT", "want a Go duration such as 30m")
	} else {
		r.check("BRIDGED_CONTAINER_TIMEOUT", agentrun.CheckContainerTimeout(c.IdleTimeout, c.ContainerTimeout))
	}
	c.Image = raw["BRIDGED_IMAGE"]
	r.check("BRIDGED_IMAGE", container.CheckImage(c.Image))
	number(r, "BRIDGED_CONTAINER_MEMORY", &c.MemoryBytes, ParseBytes, container.Bounds.MemoryBytes)
	number(r, "BRIDGED_CONTAINER_CPUS", &c.CPUs, parseFloat, container.Bounds.CPUs)
	number(r, "BRIDGED_CONTAINER_PIDS", &c.Pids, parseInt64, container.Bounds.Pids)
	c.LogLevel = strings.ToLower(raw["BRIDGED_LOG_LEVEL"])
	switch c.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		r.bad("BRIDGED_LOG_LEVEL", "want debug, info, warn or error")
	}
	c.LogFormat = strings.ToLower(raw["BRIDGED_LOG_FORMAT"])
	switch c.LogFormat {
	case "auto", "console", "json":
	default:
		r.bad("BRIDGED_LOG_FORMAT", "want auto, console or json")
	}
	c.MountAllowlist = raw["BRIDGED_MOUNT_ALLOWLIST"]
	if c.MountAllowlist != "" {
		if strings.HasPrefix(c.MountAllowlist, "~/") {
			h, err := os.UserHomeDir()
			if err != nil {
				return nil, r.bad("BRIDGED_MOUNT_ALLOWLIST", "starts with ~/ but HOME is not set; give an absolute path")
			}
			c.MountAllowlist = filepath.Join(h, c.MountAllowlist[2:])
		}
		abs, _ := filepath.Abs(c.MountAllowlist)
		if rel, err := filepath.Rel(c.Home, abs); err == nil && !strings.HasPrefix(rel, "..") {
			r.bad("BRIDGED_MOUNT_ALLOWLIST", "must be outside the home directory, where agents cannot edit it")
		}
		c.MountAllowlist = abs
	}
	number(r, "BRIDGED_PROMPT_CAP", &c.PromptCap, strconv.Atoi, router.Bounds.PromptCap)
	number(r, "BRIDGED_LATE_WINDOW", &c.LateWindow, time.ParseDuration, router.Bounds.LateWindow)
	number(r, "BRIDGED_RETRY_BASE", &c.RetryBase, time.ParseDuration, agentrun.Bounds.RetryBase)
	if c.Dashboard = strings.TrimSpace(raw["BRIDGED_DASHBOARD"]); c.Dashboard != "" {
		r.check("BRIDGED_DASHBOARD", dashboard.CheckAddr(c.Dashboard))
	}
	// Scheduled tasks' limits.
	number(r, "BRIDGED_MAX_TASKS", &c.MaxTasks, strconv.Atoi, ipchost.Bounds.MaxTasks)
	var prompt int64
	number(r, "BRIDGED_MAX_TASK_PROMPT", &prompt, ParseBytes, ipchost.Bounds.MaxTaskPrompt)
	c.MaxTaskPrompt = int(prompt)
	number(r, "BRIDGED_TASK_MAX_FAILURES", &c.TaskMaxFailures, strconv.Atoi, agentrun.Bounds.TaskMaxFailures)
	number(r, "BRIDGED_ENGINE_TIMEOUT", &c.EngineTimeout, time.ParseDuration, container.Bounds.EngineTimeout)
	number(r, "BRIDGED_START_TIMEOUT", &c.StartTimeout, time.ParseDuration, agentrun.Bounds.StartTimeout)
	c.AnthropicURL = strings.TrimSuffix(raw["BRIDGED_ANTHROPIC_URL"], "/")
	r.check("BRIDGED_ANTHROPIC_URL", credproxy.CheckUpstream(c.AnthropicURL))
	c.ContainerNetwork = raw["BRIDGED_CONTAINER_NETWORK"]
	engine, err := container.ParseEngine(raw["BRIDGED_ENGINE"])
	c.Engine = engine
	r.check("BRIDGED_ENGINE", err)
	c.KubeNamespace = strings.TrimSpace(raw["BRIDGED_KUBE_NAMESPACE"])
	c.KubeClaim = strings.TrimSpace(raw["BRIDGED_KUBE_CLAIM"])
	c.KubePod = strings.TrimSpace(raw["BRIDGED_KUBE_POD"])
	c.ProxyListen = strings.TrimSpace(raw["BRIDGED_PROXY_LISTEN"])
	if c.Engine == container.EngineKubernetes {
		if c.KubeClaim == "" {
			r.check("BRIDGED_KUBE_CLAIM", errors.New("the kubernetes engine needs the claim the home is on"))
		}
		if c.ProxyListen == "" {
			c.ProxyListen = ":7431"
		}
	}
	r.check("BRIDGED_CONTAINER_NETWORK", container.CheckNetwork(c.ContainerNetwork))
	// Proxy and container limits.
	number(r, "BRIDGED_PROXY_MAX_CONNS", &c.ProxyMaxConns, strconv.Atoi, credproxy.Bounds.MaxConns)
	number(r, "BRIDGED_PROXY_MAX_INFLIGHT", &c.ProxyMaxInFlight, strconv.Atoi, credproxy.Bounds.MaxInFlight)
	number(r, "BRIDGED_PROXY_MAX_BODY", &c.ProxyMaxBody, ParseBytes, credproxy.Bounds.MaxBody)
	number(r, "BRIDGED_PROXY_READ_TIMEOUT", &c.ProxyReadTimeout, time.ParseDuration, credproxy.Bounds.ReadTimeout)
	number(r, "BRIDGED_PROXY_IDLE_TIMEOUT", &c.ProxyIdleTimeout, time.ParseDuration, credproxy.Bounds.IdleTimeout)
	number(r, "BRIDGED_CONTAINER_NOFILE", &c.ContainerNoFile, parseInt64, container.Bounds.NoFile)
	for _, id := range []struct {
		env string
		dst *int
	}{{"BRIDGED_CONTAINER_UID", &c.ContainerUID}, {"BRIDGED_CONTAINER_GID", &c.ContainerGID}} {
		if raw[id.env] == "" {
			*id.dst = DefaultContainerID
			continue
		}
		var n int64
		if number(r, id.env, &n, parseInt64, container.Bounds.ID) {
			*id.dst, c.ContainerIDSet = int(n), true
		}
	}
	r.retention("BRIDGED_RETENTION", &c.Retention)
	if c.TranscribeURL = strings.TrimSuffix(raw["BRIDGED_TRANSCRIBE_URL"], "/"); c.TranscribeURL != "" {
		r.check("BRIDGED_TRANSCRIBE_URL", transcribe.CheckURL(c.TranscribeURL))
	}
	c.TranscribeModel = strings.TrimSpace(raw["BRIDGED_TRANSCRIBE_MODEL"])
	c.MemorySummary = strings.TrimSpace(raw["BRIDGED_MEMORY_SUMMARY"])
	if v := strings.TrimSpace(raw["BRIDGED_TELEGRAM_OWNER"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			err = fmt.Errorf("want a Telegram user id (digits; @userinfobot tells yours), not %q", v)
		}
		r.check("BRIDGED_TELEGRAM_OWNER", err)
		c.TelegramOwner = n
	}
	c.TelegramAPIURL = strings.TrimSuffix(strings.TrimSpace(raw["BRIDGED_TELEGRAM_API_URL"]), "/")
	if u, err := url.Parse(c.TelegramAPIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.check("BRIDGED_TELEGRAM_API_URL", fmt.Errorf("want an http or https URL, not %q", c.TelegramAPIURL))
	}
	r.check("BRIDGED_TRANSCRIBE_MODEL", transcribe.CheckModel(c.TranscribeModel))
	r.check("BRIDGED_MEMORY_SUMMARY", snapshot.CheckSummary(c.MemorySummary))
	number(r, "BRIDGED_MAX_MEDIA_BYTES", &c.MaxMediaBytes, ParseBytes, media.MaxBytesBound)
	number(r, "BRIDGED_SNAPSHOT_MAX_FILE", &c.SnapshotMaxFile, ParseBytes, snapshot.MaxFileBound)
	number(r, "BRIDGED_OUTBOX_FILES_PER_MINUTE", &c.OutboxFilesPerMinute, strconv.Atoi, ipchost.Bounds.FilesPerMinute)
	number(r, "BRIDGED_OUTBOX_BYTES_PER_DAY", &c.OutboxBytesPerDay, ParseBytes, ipchost.Bounds.BytesPerDay)
	number(r, "BRIDGED_LOCAL_FILES", &c.LocalFiles, strconv.Atoi, local.Bounds.Files)
	number(r, "BRIDGED_LOCAL_FILES_BYTES", &c.LocalFilesBytes, ParseBytes, local.Bounds.Bytes)
	number(r, "BRIDGED_MIN_FREE", &c.MinFree, ParseBytes, home.MinFreeBound)
	r.retention("BRIDGED_LOG_RETENTION", &c.LogRetention)
	r.retention("BRIDGED_INBOX_RETENTION", &c.InboxRetention)
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

// reader keeps the first invalid value build meets.
type reader struct {
	raw map[string]string
	err *SettingError
}

// bad records that env's value is invalid, for why, unless a value before
// it was; it returns the first invalid value.
func (r *reader) bad(env, why string) error {
	if r.err == nil {
		r.err = &SettingError{Env: env, Value: r.raw[env], Why: why}
	}
	return r.err
}

// check records err, a package's verdict on env's value, when not nil.
func (r *reader) check(env string, err error) {
	if err != nil {
		r.bad(env, err.Error())
	}
}

// bool reads env as true or false into dst.
func (r *reader) bool(env string, dst *bool) {
	v, err := strconv.ParseBool(r.raw[env])
	if err != nil {
		r.bad(env, "want true or false")
		return
	}
	*dst = v
}

// retention reads env as ParseRetention does into dst.
func (r *reader) retention(env string, dst *time.Duration) {
	d, err := ParseRetention(r.raw[env])
	if err != nil {
		r.bad(env, err.Error())
		return
	}
	*dst = d
}

// number parses env's value with parse into dst when the package's bound
// b takes it, and reports whether it did; a value that does not parse, or
// that b refuses, is invalid for b's reason.
func number[T bounds.Number](r *reader, env string, dst *T, parse func(string) (T, error), b bounds.Range[T]) bool {
	v, err := parse(r.raw[env])
	if err == nil {
		err = b.Check(v)
	}
	if err != nil {
		r.bad(env, b.Want)
		return false
	}
	*dst = v
	return true
}

func parseInt64(s string) (int64, error)   { return strconv.ParseInt(s, 10, 64) }
func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// ParseRetention parses BRIDGED_RETENTION: a number of days ("90d"), a Go
// duration ("720h"), or 0 for keeping everything forever; the retention
// package says how short it may be (retention.KeepBound).
func ParseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100000 {
			return 0, errors.New("want a number of days such as 90d, a duration such as 720h, or 0 (keep forever)")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, errors.New("want a number of days such as 90d, a duration such as 720h, or 0 (keep forever)")
		}
	}
	if err := retention.KeepBound.Check(d); err != nil {
		return 0, err
	}
	return d, nil
}

// RetryDelays are the delays before each retry of a failed run: base, 2·base,
// 4·base, 8·base, 16·base (5, 10, 20, 40, 80 s by default).
func (c *Config) RetryDelays() []time.Duration {
	d := make([]time.Duration, 5)
	for i := range d {
		d[i] = c.RetryBase << i
	}
	return d
}

// ParseBytes parses a size such as 512m, 2g, 1024k or a plain byte count.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	s = strings.TrimSuffix(s, "b")
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult, s = 1<<10, s[:n-1]
		case 'm':
			mult, s = 1<<20, s[:n-1]
		case 'g':
			mult, s = 1<<30, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<50)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return v * mult, nil
}

// ReadEnvFile reads KEY=VALUE lines; blank lines and # comments are skipped,
// an optional "export " prefix and matching quotes are removed.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vals := make(map[string]string)
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		l = strings.TrimPrefix(l, "export ")
		k, v, ok := strings.Cut(l, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: want KEY=VALUE", line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vals[k] = v
	}
	return vals, sc.Err()
}

// Mask hides all but a hint of a secret.
func Mask(v string) string {
	if v == "" {
		return "(not set)"
	}
	if len(v) <= 12 {
		return "********"
	}
	return v[:7] + "…(" + strconv.Itoa(len(v)) + " chars)"
}

// Print writes the effective configuration, one variable per line, with
// secrets masked.
func (c *Config) Print(w io.Writer) {
	lines := c.Values()
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s=%s\n", k, lines[k])
	}
}

// FormatRetention is d as BRIDGED_RETENTION takes it: whole days as "90d",
// 0 as "0".
func FormatRetention(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

// Values is the effective configuration by variable name, as Print shows
// it: secrets masked.
func (c *Config) Values() map[string]string {
	return map[string]string{
		"BRIDGED_HOME":                    c.Home,
		"BRIDGED_ASSISTANT_NAME":          c.AssistantName,
		"BRIDGED_OWN_NUMBER":              strconv.FormatBool(c.OwnNumber),
		"BRIDGED_WHATSAPP_ALWAYS_ONLINE":  strconv.FormatBool(c.AlwaysOnline),
		"BRIDGED_TIMEZONE":                c.Timezone.String(),
		"BRIDGED_DASHBOARD":               c.Dashboard,
		"BRIDGED_REMOTE_CONTROL":          strconv.FormatBool(c.RemoteControl),
		"BRIDGED_REMOTE_CONTROL_CLI":      c.RemoteControlCLI,
		"BRIDGED_MAX_CONTAINERS":          strconv.Itoa(c.MaxContainers),
		"BRIDGED_IDLE_TIMEOUT":            c.IdleTimeout.String(),
		"BRIDGED_CONTAINER_TIMEOUT":       c.ContainerTimeout.String(),
		"BRIDGED_APPROVAL_TIMEOUT":        c.ApprovalTimeout.String(),
		"BRIDGED_IMAGE":                   c.Image,
		"BRIDGED_CONTAINER_MEMORY":        strconv.FormatInt(c.MemoryBytes, 10),
		"BRIDGED_CONTAINER_CPUS":          strconv.FormatFloat(c.CPUs, 'f', -1, 64),
		"BRIDGED_CONTAINER_PIDS":          strconv.FormatInt(c.Pids, 10),
		"BRIDGED_LOG_LEVEL":               c.LogLevel,
		"BRIDGED_LOG_FORMAT":              c.LogFormat,
		"BRIDGED_MOUNT_ALLOWLIST":         c.MountAllowlist,
		"BRIDGED_PROMPT_CAP":              strconv.Itoa(c.PromptCap),
		"BRIDGED_RETRY_BASE":              c.RetryBase.String(),
		"BRIDGED_LATE_WINDOW":             c.LateWindow.String(),
		"BRIDGED_ENGINE_TIMEOUT":          c.EngineTimeout.String(),
		"BRIDGED_START_TIMEOUT":           c.StartTimeout.String(),
		"BRIDGED_ANTHROPIC_URL":           c.AnthropicURL,
		"BRIDGED_CONTAINER_NETWORK":       c.ContainerNetwork,
		"BRIDGED_ENGINE":                  string(c.Engine),
		"BRIDGED_KUBE_NAMESPACE":          c.KubeNamespace,
		"BRIDGED_KUBE_CLAIM":              c.KubeClaim,
		"BRIDGED_KUBE_POD":                c.KubePod,
		"BRIDGED_PROXY_LISTEN":            c.ProxyListen,
		"BRIDGED_CONTAINER_UID":           strconv.Itoa(c.ContainerUID),
		"BRIDGED_CONTAINER_GID":           strconv.Itoa(c.ContainerGID),
		"BRIDGED_ENV_FILE":                c.EnvFile,
		EnvAPIKey:                         Mask(c.Secrets[EnvAPIKey]),
		EnvOAuthToken:                     Mask(c.Secrets[EnvOAuthToken]),
		"BRIDGED_RETENTION":               FormatRetention(c.Retention),
		"BRIDGED_TRANSCRIBE_URL":          c.TranscribeURL,
		"BRIDGED_TRANSCRIBE_MODEL":        c.TranscribeModel,
		"BRIDGED_MAX_MEDIA_BYTES":         strconv.FormatInt(c.MaxMediaBytes, 10),
		"BRIDGED_SNAPSHOT_MAX_FILE":       strconv.FormatInt(c.SnapshotMaxFile, 10),
		"BRIDGED_MEMORY_SUMMARY":          c.MemorySummary,
		EnvTranscribeKey:                  Mask(c.TranscribeKey),
		EnvTelegramToken:                  Mask(c.TelegramToken),
		"BRIDGED_TELEGRAM_OWNER":          strconv.FormatInt(c.TelegramOwner, 10),
		"BRIDGED_TELEGRAM_API_URL":        c.TelegramAPIURL,
		"BRIDGED_OUTBOX_FILES_PER_MINUTE": strconv.Itoa(c.OutboxFilesPerMinute),
		"BRIDGED_OUTBOX_BYTES_PER_DAY":    strconv.FormatInt(c.OutboxBytesPerDay, 10),
		"BRIDGED_LOCAL_FILES":             strconv.Itoa(c.LocalFiles),
		"BRIDGED_LOCAL_FILES_BYTES":       strconv.FormatInt(c.LocalFilesBytes, 10),
		"BRIDGED_MIN_FREE":                strconv.FormatInt(c.MinFree, 10),
		"BRIDGED_LOG_RETENTION":           FormatRetention(c.LogRetention),
		"BRIDGED_INBOX_RETENTION":         FormatRetention(c.InboxRetention),
		"BRIDGED_MAX_TASKS":               strconv.Itoa(c.MaxTasks),
		"BRIDGED_MAX_TASK_PROMPT":         strconv.Itoa(c.MaxTaskPrompt),
		"BRIDGED_TASK_MAX_FAILURES":       strconv.Itoa(c.TaskMaxFailures),

		// Proxy and container limits.
		"BRIDGED_PROXY_MAX_CONNS":    strconv.Itoa(c.ProxyMaxConns),
		"BRIDGED_PROXY_MAX_INFLIGHT": strconv.Itoa(c.ProxyMaxInFlight),
		"BRIDGED_PROXY_MAX_BODY":     strconv.FormatInt(c.ProxyMaxBody, 10),
		"BRIDGED_PROXY_READ_TIMEOUT": c.ProxyReadTimeout.String(),
		"BRIDGED_PROXY_IDLE_TIMEOUT": c.ProxyIdleTimeout.String(),
		"BRIDGED_CONTAINER_NOFILE":   strconv.FormatInt(c.ContainerNoFile, 10),
	}
}

// ContainerUser is the uid:gid containers run as for a daemon running as
// euid:egid: the configured ids when it is root, else its own (an agent never
// runs as root). ignored reports configured ids that do not apply.
func (c *Config) ContainerUser(euid, egid int) (uid, gid int, ignored bool) {
	if euid == 0 {
		return c.ContainerUID, c.ContainerGID, false
	}
	return euid, egid, c.ContainerIDSet
}

// Paths under the home directory; internal/home has the agent-writable ones.
func (c *Config) StoreDB() string    { return filepath.Join(c.Home, "store", "bridged.db") }
func (c *Config) WhatsAppDB() string { return filepath.Join(c.Home, "store", "whatsapp.db") }

// TelegramTokenFile is where `bridged login telegram` keeps the bot token.
func (c *Config) TelegramTokenFile() string { return filepath.Join(c.Home, "store", "telegram-token") }
func (c *Config) Socket() string            { return filepath.Join(c.Home, "bridged.sock") }
func (c *Config) DataDir() string           { return filepath.Join(c.Home, "data") }

// Variable is one configuration variable, for documents that list them.
type Variable struct {
	Env     string // BRIDGED_… or a credential's name
	Usage   string
	Default string // "" for none or computed
	Secret  bool
}

// Variables lists every configuration variable, the credentials last.
func Variables() []Variable {
	out := make([]Variable, 0, len(settings)+3)
	for _, s := range settings {
		def := ""
		if s.env != "BRIDGED_HOME" && s.env != "BRIDGED_TIMEZONE" && s.env != "BRIDGED_MOUNT_ALLOWLIST" {
			def = s.def()
		}
		out = append(out, Variable{Env: s.env, Usage: s.usage, Default: def})
	}
	return append(out,
		Variable{Env: EnvAPIKey, Usage: "Claude API key (or the OAuth token below); read by the daemon only", Secret: true},
		Variable{Env: EnvOAuthToken, Usage: "Claude Code OAuth token (claude setup-token)", Secret: true},
		Variable{Env: EnvTranscribeKey, Usage: "bearer token of the transcription endpoint; read by the daemon only", Secret: true},
		Variable{Env: EnvTelegramToken, Usage: "the Telegram bot's token (from @BotFather); read by the daemon and `bridged login telegram` only", Secret: true})
}

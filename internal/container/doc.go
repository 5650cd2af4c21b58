// Package container starts and stops agent containers.
//
// Runtime is the interface the rest of the daemon uses; Docker implements it
// over the Engine API (github.com/moby/moby/client), never the docker CLI,
// for Docker and rootless Podman (podman.go); Kubernetes implements it with
// one Pod per run (kubernetes.go, decision record 36). The
// engine-independent runtime suite (runtimesuite_test.go) runs on all three.
// The package also builds the mount list of DESIGN §7 (Mounts), prepares a
// group's host directories (PrepareGroupDirs), checks extra mounts against
// the mount allowlist of DESIGN §11 (Allowlist), and creates a group's
// .claude/settings.json before its first run (EnsureSettings). Those host
// directories are agent-writable: the package touches them only through
// internal/home, never by path.
//
// # Specs
//
// SpecBuilder turns a group and its run input into a container's Spec:
// before each run of a group that is not full it moves aside what the agent
// left where claude reads its configuration (home.Home.Quarantine) and
// tells SpecBuilder.Planted; it prepares the group (its directories,
// settings.json, and the CLAUDE.md templates, main's for the main group and
// the global one, installed where missing) and writes claude's managed
// settings for the group's profile (WriteManagedSettings), then sets the
// image, the labels, the container user, the mounts (the group's, the
// managed settings read-only, plus the extra mounts the allowlist grants;
// refused ones are logged and left out), the limits, TZ
// from the daemon's time zone, the network mode, the credentials as
// forbidden values, and, with a credential proxy, the container's own proxy
// socket mounted read-only with the variables that point claude at it.
// CheckMounts checks every source again right before the container is
// created, and records in each mount the device and inode it found there.
//
// # Containers
//
// Every container carries the labels bridged.managed=1, bridged.group,
// bridged.instance and bridged.home (HomeLabel; StopLeftovers stops a
// home's containers that other instances left), runs the image's
// entrypoint as a non-root uid:gid (the daemon's own, or BRIDGED_CONTAINER_UID:GID, default 61000:61000, when the
// daemon runs as root; Start refuses root), with every capability dropped, no-new-privileges, memory, CPU and
// pids limits, a tmpfs /tmp (mode 1777), the engine's init process as PID 1,
// and auto-remove. The run input, credentials included, travels only on the
// container's stdin: Start refuses a Spec whose environment, labels or name
// would carry a credential. Stdout lines are decoded as events; lines that do
// not decode are logged (a short prefix, at warn) and skipped. Stderr lines go
// to Spec.Stderr.
//
// The engine resolves bind sources when it starts a container, after they
// were checked. So once the container has started, and before its input is
// written, Start looks at each mount from the host through the container's
// root (/proc/<pid>/root/<target>) and compares its device and inode with
// the ones recorded when the source was checked (Mount.ID); a mount that is
// another file, or cannot be looked at, stops and removes the container and
// fails the start (ErrMountChanged for the former). A daemon that may not
// look there (neither root nor a rootless engine's user, its container of
// another uid) takes the device and inode from the runner's report
// instead, its first stdout line, written before it reads its input
// (mountreport.go). A source the engine
// finds missing is refused, never made: Docker refuses it, and Podman, whose
// Docker API would make it an empty directory, is given each source as a
// link the daemon made (DockerOptions.LinkDir); the start fails with
// ErrMountChanged naming the source.
//
// # Mount allowlist
//
// Extra mounts are allowed only by a JSON file outside the bridged home
// (BRIDGED_MOUNT_ALLOWLIST, default ~/.config/bridged/mount-allowlist.json),
// which is never mounted into any container:
//
//	{
//	  "allowedRoots": [
//	    {"path": "~/projects", "allowReadWrite": true, "description": "code"},
//	    {"path": "/srv/shared/docs", "allowReadWrite": false}
//	  ],
//	  "blockedPatterns": ["*.pem", "tokens"],
//	  "nonMainReadOnly": true
//	}
//
// No file means no extra mounts at all; a file that is not valid JSON, or has
// unknown fields, is an error naming it. Roots that do not exist are ignored.
// nonMainReadOnly defaults to true. A requested host path has ~ expanded and
// its symlinks resolved before any check; it must exist, lie under an allowed
// root, must not overlap the allowlist file or the bridged home, and no
// component of it may match a blocked pattern: the defaults (.ssh .gnupg .aws
// .azure .gcloud .kube .docker credentials .env .netrc .npmrc id_rsa
// id_ed25519 private_key .secret) plus the file's. A pattern with * ? or [ is
// a glob matched against a whole path component; any other pattern matches a
// component containing it at word boundaries (".env" blocks ".env.local" and
// "prod.env" but not ".environment"), ignoring case. Inside an allowed
// directory, entries whose names match a blocked pattern, up to MaskDepth (3)
// levels deep, are hidden by empty read-only mounts (Allowlist.WithMasks;
// mask.go explains the walk, its limits and why symlinks need no mask). The
// mount appears at
// /workspace/extra/<name>, where name (default: the directory's name) is one
// simple component (letters, digits, . _ -; no .., no /). It is read-write
// only when asked for, allowed by its root, and the group is main or
// nonMainReadOnly is false; otherwise read-only.
//
// # Supervision callbacks
//
// Supervise hands every stdout line to Watch.Event with its own ctx: that
// callback does the run's work (it commits results). Watch.Started,
// Watch.Stopping and Watch.Held take no context: they are signals that
// record or read the run's state in memory (the container's id, that it
// is stopping, whether its turn is held) and must not block, so there is
// nothing a context would bound. Spec.Stderr is the same: a line to log.
package container

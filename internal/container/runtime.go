package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Labels put on every container bridged starts.
const (
	LabelManaged  = "bridged.managed"
	LabelGroup    = "bridged.group"
	LabelInstance = "bridged.instance"
	// LabelHome identifies the bridged home a container belongs to (see
	// HomeLabel), so start-up cleanup removes only the leftovers of the same
	// home and never another daemon's containers on the same engine.
	LabelHome = "bridged.home"
)

// Mount is one bind mount.
type Mount struct {
	Source   string // absolute host path
	Target   string // absolute container path
	ReadOnly bool
	// ID is the source's device and inode as they were checked
	// (SpecBuilder.CheckMounts): once the container has started, and before
	// its input is written, Start confirms that what the container sees at
	// Target is that very file, and stops the container otherwise. The
	// zero ID has Start take it itself right before the container is
	// created.
	ID FileID
}

// FileID identifies a file on the host: its device and inode.
type FileID struct {
	Dev, Ino uint64
}

// IsZero reports whether id was never set.
func (id FileID) IsZero() bool { return id == FileID{} }

func (id FileID) String() string { return fmt.Sprintf("device %d inode %d", id.Dev, id.Ino) }

// FileIDOf returns the device and inode of fi (a zero FileID when fi comes
// from no stat).
func FileIDOf(fi os.FileInfo) FileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
	}
	return FileID{}
}

// ErrMountChanged is wrapped by the error Start returns when a bind mount
// of the started container is not the file its source was when it was
// checked: the source was swapped (for a link, or another directory)
// between the check and the start, when the engine resolved it. The
// container was stopped before anything ran in it.
var ErrMountChanged = errors.New("a bind mount is not the directory that was checked")

// Limits are the resource limits of a container.
type Limits struct {
	MemoryBytes int64   // 0: no limit
	CPUs        float64 // 0: no limit
	Pids        int64   // 0: no limit
	TmpBytes    int64   // size of the /tmp tmpfs; 0: DefaultTmpBytes
	NoFile      int64   // open files (nofile ulimit, soft and hard); 0: DefaultNoFile
}

// Spec is everything needed to start one agent container.
type Spec struct {
	Name     string       // container name, unique
	Image    string       // image reference
	Group    string       // group folder, for the label
	Instance string       // daemon instance id, for the label
	Home     string       // HomeLabel of the daemon's home, for the label
	User     string       // "uid:gid"; never empty, never root
	Mounts   []Mount      // see Mounts
	Env      []string     // KEY=value, never secrets
	Input    ipc.RunInput // written to stdin, then EOF (holds no credential)
	// Network is the network mode ("" or "bridge": the engine's default;
	// "none": loopback only).
	Network string
	// Forbidden are values (the Claude credentials) that must appear
	// nowhere in the container's configuration; Start refuses a spec that
	// holds one. They are never sent to the engine.
	Forbidden []string
	Limits    Limits            //
	Labels    map[string]string // extra labels
	// Stderr receives the container's stderr lines (free-form log); may be nil.
	Stderr func(line string)
}

// Exit is how a container ended.
type Exit struct {
	Code int
	Err  error // set when the runtime failed to observe the exit
}

// ErrLost is wrapped by Exit.Err when the runtime lost its connection to a
// running container (its output or its end could no longer be followed: the
// engine restarted, a proxy dropped the connection): the runtime then stopped
// the container, so it is gone when Wait returns, unless Exit.Err is also a
// *NotStoppedError.
var ErrLost = errors.New("lost the engine connection to the container")

// NotStoppedError is returned (or is Exit.Err) when a container that may
// still run could not be stopped and removed: the engine did not answer in
// time or refused. Nothing must start in its place until it is gone.
type NotStoppedError struct {
	ID  string // container id
	Err error  // why: the lost connection and the failed stop
}

func (e *NotStoppedError) Error() string {
	return fmt.Sprintf("container %s may still be running and could not be stopped: %v", shortID(e.ID), e.Err)
}

func (e *NotStoppedError) Unwrap() error { return e.Err }

// Run is one started container.
type Run interface {
	// ID is the container id.
	ID() string
	// Events yields each decoded stdout line; it is closed when stdout ends.
	Events() <-chan ipc.Event
	// Wait blocks until the container has exited and returns how.
	Wait(ctx context.Context) (Exit, error)
}

// Info describes a managed container found by ListManaged.
type Info struct {
	ID       string
	Name     string
	Group    string
	Instance string
	Home     string // the bridged.home label
	State    string
}

// Runtime starts and stops agent containers.
type Runtime interface {
	// Start creates, attaches and starts a container, writes spec.Input to
	// its stdin and closes stdin. It returns once the container runs.
	Start(ctx context.Context, spec Spec) (Run, error)
	// Stop asks the container to stop, kills it after grace, and removes it.
	// A container that is already gone is not an error. It returns nil only
	// once the container is gone.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// ListManaged lists containers carrying the bridged.managed label.
	ListManaged(ctx context.Context) ([]Info, error)
}

// HomeLabel is the value of the bridged.home label for a home directory: a
// short hash of its absolute path, so the path itself is not exposed.
func HomeLabel(home string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(home)))
	return hex.EncodeToString(sum[:8])
}

package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A mistyped command is answered with the nearest one (exit 2), and an
// unknown BRIDGED_ variable in the daemon's environment is named in its
// first lines with the setting it likely meant; the daemon still starts.
func TestE2EMistakesNamed(t *testing.T) {
	parallel(t, light)
	cmd := exec.Command(bridgedBin, "stauts")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "did you mean status?") {
		t.Errorf("bridged stauts: %v\n%s\nwant exit 2 and the nearest command", err, out)
	}

	e := newEnv(t)
	e.extraEnv = []string{"BRIDGED_IDEL_TIMEOUT=5m"}
	d := e.start()
	if !d.waitLog("did you mean BRIDGED_IDLE_TIMEOUT?", 30*time.Second) {
		t.Errorf("the daemon's log does not name BRIDGED_IDEL_TIMEOUT with BRIDGED_IDLE_TIMEOUT:\n%s", d.logs())
	}
	if _, err := e.cli("status"); err != nil {
		t.Errorf("status: %v", err)
	}
	d.stop(t)
}

package ipchost

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine one of them started
// still runs after the last: a leak the tests would otherwise hide.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

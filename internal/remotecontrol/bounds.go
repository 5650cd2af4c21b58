package remotecontrol

import (
	"errors"
	"strings"
)

// CheckCLI says why cli cannot be Config.CLI (nil when it can).
func CheckCLI(cli string) error {
	if strings.TrimSpace(cli) == "" {
		return errors.New("want the claude CLI's path or name, such as claude")
	}
	return nil
}

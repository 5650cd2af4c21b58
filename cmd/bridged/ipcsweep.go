package main

import "github.com/bridged-app/bridged/internal/router"

// liveFolders names the groups with a live container: the IPC host's
// safety sweep lists their requests directories every time and the idle
// groups' only in turn (ipchost.Config.Live).
func liveFolders(rt *router.Router) func() []string {
	return func() []string {
		cs := rt.Status().Containers
		out := make([]string, 0, len(cs))
		for _, c := range cs {
			out = append(out, c.Group)
		}
		return out
	}
}

package ipctest

import "github.com/bridged-app/bridged/internal/ipc"

// WriteInput queues a follow-up message in l's input directory, as the host
// does, and returns its file name. (The daemon itself writes through its
// home's door into the agent-writable tree, never straight to a path.)
func WriteInput(l ipc.Layout, text string) (string, error) {
	in := ipc.Input{Type: ipc.InputMessage, Text: text}
	if err := in.Validate(); err != nil {
		return "", err
	}
	name := ipc.NewName() + ".json"
	return name, ipc.WriteJSON(l.Input(), name, in)
}

// WriteClose writes the close sentinel in l's input directory.
func WriteClose(l ipc.Layout) error {
	return ipc.WriteFileAtomic(l.Input(), ipc.CloseName, nil)
}

package home

import (
	"encoding/json"
	"fmt"

	"github.com/bridged-app/bridged/internal/ipc"
)

// clearChunk is how many stale input files are listed at once.
const clearChunk = 1024

// Input opens the group's data/ipc/<folder>/input, where the host writes
// the agent's follow-up turns and the close sentinel (DESIGN §8). Close it
// when done.
func (h *Home) Input(folder string) (*Tree, error) {
	t, err := h.IPC(folder)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return t.Dir(ipc.InputDir)
}

// WriteInput queues a follow-up turn for folder's agent, input/<seq>.json
// holding {"type":"message","text":…}, and returns the file's name.
func (h *Home) WriteInput(folder, text string) (string, error) {
	msg := ipc.Input{Type: ipc.InputMessage, Text: text}
	if err := msg.Validate(); err != nil {
		return "", err
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return "", fmt.Errorf("encode input: %w", err)
	}
	in, err := h.Input(folder)
	if err != nil {
		return "", err
	}
	defer in.Close()
	name := ipc.NewName() + ".json"
	if err := in.WriteFile(name, data, 0o644); err != nil {
		return "", err
	}
	h.inputWritten(folder)
	return name, nil
}

// WriteClose writes the close sentinel, input/_close (empty), replacing
// whatever the agent put at that name.
func (h *Home) WriteClose(folder string) error {
	in, err := h.Input(folder)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := in.WriteFile(ipc.CloseName, nil, 0o644); err != nil {
		return err
	}
	h.inputWritten(folder)
	return nil
}

// InputChanged returns a channel closed when WriteInput or WriteClose next
// writes to folder's input: the IPC channel's input stream waits on it
// instead of watching the directory, which on a network volume shared
// across nodes raises no event (decision record 42).
func (h *Home) InputChanged(folder string) <-chan struct{} {
	h.inputMu.Lock()
	defer h.inputMu.Unlock()
	if h.inputWake == nil {
		h.inputWake = map[string]chan struct{}{}
	}
	ch := h.inputWake[folder]
	if ch == nil {
		ch = make(chan struct{})
		h.inputWake[folder] = ch
	}
	return ch
}

// inputWritten wakes the waiters of folder's input.
func (h *Home) inputWritten(folder string) {
	h.inputMu.Lock()
	ch := h.inputWake[folder]
	delete(h.inputWake, folder)
	h.inputMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// RemoveClose removes a stale close sentinel from folder's input/ (piped
// input files are kept).
func (h *Home) RemoveClose(folder string) error {
	in, err := h.Input(folder)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := in.Remove(ipc.CloseName); err != nil {
		return fmt.Errorf("remove stale close sentinel: %w", err)
	}
	return nil
}

// ClearInput removes every file in folder's input/ (listed a bounded chunk
// at a time; links are removed, never followed).
func (h *Home) ClearInput(folder string) error {
	in, err := h.Input(folder)
	if err != nil {
		return err
	}
	defer in.Close()
	for {
		names, more, err := in.List(clearChunk)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := in.Remove(n); err != nil {
				return err
			}
		}
		if !more || len(names) == 0 {
			return nil
		}
	}
}

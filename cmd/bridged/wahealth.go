package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// healthNote is what a connected channel's health adds to its state: ""
// when it is stable (or does not say), else " but <health>" and, for a
// condition with an end, " until <time>".
func healthNote(state, health string, conds []control.ChannelCondition) string {
	if state != string(channel.StateConnected) || health == "" || health == string(channel.HealthStable) {
		return ""
	}
	note := " but " + health
	for _, c := range conds {
		if c.Health == health && !c.Until.IsZero() {
			note += " until " + c.Until.UTC().Format("2006-01-02 15:04 UTC")
			break
		}
	}
	return note
}

// statusHealthNote is healthNote for the STATUS= line.
func statusHealthNote(wa channel.Status) string {
	conds := make([]control.ChannelCondition, 0, len(wa.Conditions))
	for _, c := range wa.Conditions {
		conds = append(conds, control.ChannelCondition{Health: string(c.Health), Until: c.Until})
	}
	return healthNote(string(wa.State), string(wa.Health), conds)
}

// printConditions lists each channel's conditions under the channels.
func printConditions(w io.Writer, chs []control.ChannelStatus, clock func(time.Time) string) {
	for _, ch := range chs {
		for _, c := range ch.Conditions {
			var when []string
			if !c.Since.IsZero() {
				when = append(when, "since "+clock(c.Since))
			}
			if !c.Until.IsZero() {
				when = append(when, "until "+clock(c.Until))
			}
			head := ch.Name + " " + c.Key
			if len(when) > 0 {
				head += " (" + strings.Join(when, ", ") + ")"
			}
			fmt.Fprintf(w, "  %s: %s\n", termsafe.Line(head), termsafe.Line(c.Text))
		}
	}
}

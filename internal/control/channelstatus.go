package control

import "github.com/bridged-app/bridged/internal/channel"

// channelStatus is a channel's status as the API shows it.
func channelStatus(name string, cs channel.Status) ChannelStatus {
	out := ChannelStatus{Name: name, State: string(cs.State), Detail: cs.Detail, Since: cs.Since, Health: string(cs.Health), Polled: cs.Polled}
	for _, c := range cs.Conditions {
		out.Conditions = append(out.Conditions, ChannelCondition{
			Key: c.Key, Health: string(c.Health), Text: c.Text, Since: c.Since, Until: c.Until,
		})
	}
	return out
}

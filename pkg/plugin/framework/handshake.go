package framework

import plugin "github.com/hashicorp/go-plugin"

// Handshake is what a plugin process and its host check before they talk.
// The values are Velero's: a plugin built for Velero is accepted by
// Lifeboat's host and the other way round.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "VELERO_PLUGIN",
	MagicCookieValue: "hello",
}

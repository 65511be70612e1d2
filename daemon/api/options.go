package api

import "maps"

// A session's options, by name: each sets one settings key. A command line's flags carry
// these names and bind these keys; an OpenRequest's Settings may set these keys and no
// other. The tables are read through copies (TransportKeys, RunKeys, OptionKeys).

// transportKeys are the settings keys of the transport's options, by option name.
var transportKeys = map[string]string{
	"transport":     "kernelTransport.kind",
	"image":         "kernelTransport.docker.image",
	"network":       "kernelTransport.docker.network",
	"memory":        "kernelTransport.docker.memory",
	"pids-limit":    "kernelTransport.docker.pids",
	"user":          "kernelTransport.docker.user",
	"writable-root": "kernelTransport.docker.writableRoot",
	"pool":          "kernelTransport.docker.pool",
	"docker-host":   "kernelTransport.docker.host",
	"env":           "kernelTransport.env",
	"runtime":       "kernelTransport.runtime",
	"kernel-path":   "kernelTransport.wrapped.kernelPath",
	"host":          "kernelTransport.ssh.host",
	"kernel-cache":  "kernelTransport.ssh.kernelCache",
	"sync":          "kernelTransport.ssh.sync",
	"egress":        "network.egress",
}

// runKeys are the settings keys of a session's output and shell options, by option name.
var runKeys = map[string]string{
	"max-bytes":    "output.bytes",
	"max-lines":    "output.lines",
	"keep":         "output.mode",
	"auto-effects": "shell.autoEffects",
	"job-timeout":  "shell.jobTimeout",
}

// TransportKeys are the settings keys of the transport's options, by option name (a copy).
func TransportKeys() map[string]string { return maps.Clone(transportKeys) }

// RunKeys are the settings keys of the output and shell options, by option name (a copy).
func RunKeys() map[string]string { return maps.Clone(runKeys) }

// OptionKeys are every settings key a session's options set, by option name: the keys an
// OpenRequest's Settings may set (a copy).
func OptionKeys() map[string]string {
	m := maps.Clone(transportKeys)
	maps.Copy(m, runKeys)
	return m
}

package docker

// This file lets the other container transports (containerd, the warm pool) label what they
// make with the same owner as this one, so one reaper rule judges them all.

// HostLabels are the labels that name this host process: its machine, boot, pid and start
// time.
func HostLabels() map[string]string { return selfLabels() }

// Self is the reaper's view of this process's machine.
func Self() Owner { return self() }

package docker

import "strconv"

// This file holds the reaper's rule, pure: which of Paddock's containers are leftovers of a
// host process that died.

// Owner is what the reaper knows of the process reaping: its machine and boot, and how to
// tell whether a process of this machine and boot still runs.
type Owner struct {
	Machine string
	Boot    string
	PIDNS   string // the pid namespace its pids are of
	// Alive reports whether the process pid, started at start (as /proc says), runs.
	Alive func(pid int, start string) bool
	// Waiting reports whether a listening kernel's directory is still there: its owner's
	// state keeps it, and a new host will reattach or remove it.
	Waiting func(dir string) bool
}

// Leftover reports whether a container with these labels belongs to a host process that
// died: it is Paddock's, of this machine, and of an earlier boot, or its host process is gone
// (its pid, of this pid namespace, does not run, or runs a process started at another time)
// and, when its kernel listens, the directory it listens in is gone. A container of another
// machine, of another pid namespace of this boot, or without its host's labels, is never a
// leftover: its owner cannot be judged from here.
func Leftover(labels map[string]string, o Owner) bool {
	if labels[LabelManaged] != "1" || o.Machine == "" || labels[LabelMachine] != o.Machine {
		return false
	}
	if b := labels[LabelBoot]; b != "" && o.Boot != "" && b != o.Boot {
		return true
	}
	// A host of another pid namespace (another container on this machine and boot): its pid
	// and its directory are not this one's to look up. (A container labelled before hosts
	// said theirs is judged as before.)
	if n := labels[LabelPIDNS]; n != "" && n != o.PIDNS {
		return false
	}
	if d := labels[LabelListen]; d != "" && o.Waiting != nil && o.Waiting(d) {
		return false
	}
	pid, err := strconv.Atoi(labels[LabelPID])
	if err != nil || pid <= 0 {
		return false
	}
	return o.Alive == nil || !o.Alive(pid, labels[LabelStart])
}

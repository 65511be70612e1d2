package images

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// HostRef is the host image's reference: an empty image, made locally, that a sandbox runs
// with the host's system directories bound in read-only.
const HostRef = "paddock-host:1"

// SystemMount is a host directory or file bound read-only into a sandbox at the same path.
type SystemMount struct {
	Host    string // what is bound: the entry itself, or the real path of a symlink
	Sandbox string // where it is seen
}

// SystemDirs are the host's directories a host-image sandbox sees: its programs and
// libraries. A symlink among them (/bin -> usr/bin) is bound from its target.
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// SystemEtc are the harmless parts of the host's /etc: who users and groups are, how names
// and libraries resolve, the alternatives Debian's programs link through, public
// certificates, the time zone and shell startup. Never a secret (shadow, ssh keys, sudoers,
// private keys) and never what the engine writes itself (hosts, hostname, resolv.conf).
var SystemEtc = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/host.conf",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/ca-certificates.conf",
	"/etc/localtime", "/etc/timezone", "/etc/protocols", "/etc/services", "/etc/mime.types",
	"/etc/profile", "/etc/profile.d", "/etc/bash.bashrc", "/etc/inputrc", "/etc/environment",
	"/etc/os-release", "/etc/debian_version", "/etc/locale.alias", "/etc/magic",
}

// etcSecrets are never bound, even when a list names them: a guard against a widened list.
var etcSecrets = []string{"/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers", "/etc/ssl/private", "/etc/security"}

// Entry is what the host has at a path, for SystemMounts to decide by.
type Entry struct {
	Exists bool
	Link   string // the real path when the entry is a symlink; "" when it is not one
}

// SystemMounts decides the read-only mounts of the host image: each of names the host has
// is bound at its own path, a symlink from its real path (the sandbox's root is empty, so
// the link itself could not resolve there). Names the host lacks, dangling links and the
// secrets of /etc are left out.
func SystemMounts(names []string, look func(string) Entry) []SystemMount {
	var out []SystemMount
	seen := map[string]bool{}
	for _, n := range names {
		n = filepath.Clean(n)
		if seen[n] || secretEtc(n) {
			continue
		}
		e := look(n)
		if !e.Exists {
			continue
		}
		src := n
		if e.Link != "" {
			src = e.Link
			if secretEtc(src) {
				continue
			}
		}
		seen[n] = true
		out = append(out, SystemMount{Host: src, Sandbox: n})
	}
	return out
}

func secretEtc(p string) bool {
	for _, s := range etcSecrets {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// HostMounts are the read-only mounts that give a host-image sandbox the host's toolset,
// looked up on this machine.
func HostMounts() []SystemMount {
	return SystemMounts(append(append([]string{}, SystemDirs...), SystemEtc...), lookHost)
}

func lookHost(p string) Entry {
	fi, err := os.Lstat(p)
	if err != nil {
		return Entry{}
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return Entry{Exists: true}
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Entry{} // dangling: nothing to bind
	}
	return Entry{Exists: true, Link: real}
}

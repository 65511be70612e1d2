// Package config reads Paddock's settings: flags, then PADDOCK_* environment variables, then
// the global settings file (trusted), then a project's .paddock/settings file (untrusted: it
// is decoded into Project, which holds only the few settings a project may set, within
// bounds, so it can never choose where kernels run or widen what runs unasked).
package config

import (
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// Settings are the effective settings.
type Settings struct {
	// KernelTransport says where kernels run. Trusted: global settings only.
	KernelTransport KernelTransport `mapstructure:"kernelTransport" json:"kernelTransport"`
	Shell           Shell           `mapstructure:"shell" json:"shell"`
	SSH             SSH             `mapstructure:"ssh" json:"ssh"`
	Output          Output          `mapstructure:"output" json:"output"`
	// Network says what a sandbox reaches through the host's proxy. Trusted: global
	// settings only.
	Network Network `mapstructure:"network" json:"network"`
}

// Network configures egress: the connections a sandbox makes through the host's proxy,
// each judged there.
type Network struct {
	// Allow are the targets connected to unasked: host names (github.com), domains
	// (*.golang.org:443), addresses and ranges (10.0.0.5:5432, 10.0.0.0/8). A link-local,
	// metadata, loopback or private address is reached only when listed as an address.
	Allow []string `mapstructure:"allow" json:"allow"`
	// Deny are the targets never connected to; a deny wins over every allow.
	Deny []string `mapstructure:"deny" json:"deny"`
	// Egress: auto (the proxy for container sandboxes without a network of their own),
	// proxy (also local and wrapped kernels, whose proxy variables are advisory) or off.
	Egress string `mapstructure:"egress" json:"egress"`
}

// Output bounds what steps and jobs print: the truncation setting of every result, and the
// cap of a job's artifact file.
type Output struct {
	output.Limit `mapstructure:",squash"`
	// ArtifactBytes caps the file that receives a job's whole output: past it the file keeps
	// the first and the last half of the cap and counts the bytes between as dropped; 0: no
	// cap. Trusted: a project's settings cannot set it.
	ArtifactBytes int64 `mapstructure:"artifactBytes" json:"artifactBytes"`
}

// Validate refuses an invalid truncation setting or artifact cap.
func (o Output) Validate() error {
	if err := o.Limit.Validate(); err != nil {
		return err
	}
	return output.Spill{Cap: o.ArtifactBytes}.Validate()
}

// KernelTransport configures the transport of new sessions.
type KernelTransport struct {
	// Kind: local, docker, containerd, wrapped or ssh; "" lets Paddock choose (docker when an
	// engine is reachable, else local).
	Kind string `mapstructure:"kind" json:"kind"`
	// PathMap lists the directories both sides see.
	PathMap []pathmap.Mount `mapstructure:"pathMap" json:"pathMap"`
	// Env names the host variables passed to a non-local kernel (credentials never are).
	Env []string `mapstructure:"env" json:"env"`
	// Runtime is the OCI runtime container sandboxes run under: "" the engine's default
	// (runc), "runsc" gVisor (a second kernel between the sandbox and the host's), or
	// another the engine knows. Trusted, as every kernelTransport key.
	Runtime string `mapstructure:"runtime" json:"runtime"`

	Docker     Docker     `mapstructure:"docker" json:"docker"`
	Wrapped    Wrapped    `mapstructure:"wrapped" json:"wrapped"`
	SSH        SSHHost    `mapstructure:"ssh" json:"ssh"`
	Kubernetes Kubernetes `mapstructure:"kubernetes" json:"kubernetes"`
}

// Kubernetes configures pod sandboxes (kind kubernetes). The confinement is the docker
// settings' (memory, user, writableRoot) where a pod applies it, and so is the pool: warm
// pods are kept by kernelTransport.docker.pool, as warm containers are.
type Kubernetes struct {
	Kubeconfig  string `mapstructure:"kubeconfig" json:"kubeconfig"`   // "": KUBECONFIG, ~/.kube/config, else in-cluster
	Context     string `mapstructure:"context" json:"context"`         // "": the kubeconfig's current context
	Namespace   string `mapstructure:"namespace" json:"namespace"`     // "": the context's, else default
	Image       string `mapstructure:"image" json:"image"`             // "": kernelTransport.docker.image
	KernelImage string `mapstructure:"kernelImage" json:"kernelImage"` // "": the kernel is streamed in
	PullPolicy  string `mapstructure:"pullPolicy" json:"pullPolicy"`   // Always, IfNotPresent, Never
	// RuntimeClassName runs the pods under a runtime class (gvisor, kata).
	RuntimeClassName string            `mapstructure:"runtimeClassName" json:"runtimeClassName"`
	NodeSelector     map[string]string `mapstructure:"nodeSelector" json:"nodeSelector"`
	// Resources are the container's requests and limits (cpu, memory, ephemeral-storage).
	Resources struct {
		Requests map[string]string `mapstructure:"requests" json:"requests"`
		Limits   map[string]string `mapstructure:"limits" json:"limits"`
	} `mapstructure:"resources" json:"resources"`
	// Claims name the PersistentVolumeClaim holding a pathMap entry's host directory, by
	// that directory; an entry no claim names is a hostPath volume.
	Claims map[string]string `mapstructure:"claims" json:"claims"`
	// Sync copies the workspace into the pod and hands it back at the end (as ssh's sync).
	Sync bool `mapstructure:"sync" json:"sync"`
}

// Docker configures container sandboxes (Docker and containerd).
type Docker struct {
	Image        string `mapstructure:"image" json:"image"`               // "": the host image
	Network      string `mapstructure:"network" json:"network"`           // "": none
	Memory       string `mapstructure:"memory" json:"memory"`             // e.g. 2g
	Pids         int64  `mapstructure:"pids" json:"pids"`                 // process limit
	User         string `mapstructure:"user" json:"user"`                 // "": the image's
	WritableRoot bool   `mapstructure:"writableRoot" json:"writableRoot"` // the root filesystem is read-only unless set
	Pool         int    `mapstructure:"pool" json:"pool"`                 // warm sandboxes kept per image (containers, pods)
	// Host is the engine's API endpoint, as DOCKER_HOST names one: Podman's Docker-compatible
	// service (unix:///run/podman/podman.sock) makes Podman the docker transport's engine;
	// "": DOCKER_HOST, else the local Docker engine.
	Host string `mapstructure:"host" json:"host"`
}

// Wrapped configures a kernel started under a wrapper command.
type Wrapped struct {
	ArgvPrefix []string `mapstructure:"argvPrefix" json:"argvPrefix"` // e.g. docker exec -i box
	KernelPath string   `mapstructure:"kernelPath" json:"kernelPath"` // the kernel's path inside the sandbox
}

// SSHHost configures a kernel on a remote box.
type SSHHost struct {
	Host        string `mapstructure:"host" json:"host"`               // an ssh_config alias or [user@]host[:port]
	KernelCache string `mapstructure:"kernelCache" json:"kernelCache"` // where kernels are kept on the box
	Sync        bool   `mapstructure:"sync" json:"sync"`               // copy the workspace up and hand it back
	// OrphanAfter is how long a kernel that listens on the box (a daemon's session's) lives
	// on with no host attached, e.g. 24h; "0": for ever. Past it the kernel ends with its
	// programs: a daemon that never comes back leaves nothing running on the box.
	OrphanAfter string `mapstructure:"orphanAfter" json:"orphanAfter"`
}

// Shell configures the bash tool.
type Shell struct {
	// AutoEffects are the effects a step may have and still run unasked. Trusted.
	AutoEffects []string `mapstructure:"autoEffects" json:"autoEffects"`
	// Rules allow, ask or deny steps by command prefix, before the auto set. Trusted.
	Rules []Rule `mapstructure:"rules" json:"rules"`
	// BlockingBudget is how long a call blocks before it detaches, e.g. "30s".
	BlockingBudget string `mapstructure:"blockingBudget" json:"blockingBudget"`
	// JobTimeout kills a call that has run this long, a job or a call that blocks to its end,
	// e.g. "2h"; "": never. Trusted.
	JobTimeout string `mapstructure:"jobTimeout" json:"jobTimeout"`
}

// Rule is one shell rule: Action (allow, ask, deny) for steps whose command starts with the
// words of Command.
type Rule struct {
	Action  string `mapstructure:"action" json:"action"`
	Command string `mapstructure:"command" json:"command"`
}

// SSH configures ssh:// reads.
type SSH struct {
	// Hosts may be read with ssh://HOST/PATH. Trusted.
	Hosts []string `mapstructure:"hosts" json:"hosts"`
}

// Defaults are the settings before any source sets one.
func Defaults() Settings {
	return Settings{
		Output: Output{Limit: output.Default(), ArtifactBytes: output.DefaultArtifactBytes},
		Shell:  Shell{AutoEffects: []string{"read", "write", "exec", "net", "outside", "protected"}, BlockingBudget: "30s"},
		KernelTransport: KernelTransport{
			Docker: Docker{Memory: "2g", Pids: 1024},
		},
	}
}

// Package pathmap maps paths between a sandbox and the host: a list of mounts, the deepest
// mount holding a path maps it, both ways, and a host path that symlinks out of every mount is
// refused.
package pathmap

// Mount is one directory seen by both sides.
type Mount struct {
	Sandbox  string `json:"sandbox" mapstructure:"sandbox"`
	Host     string `json:"host" mapstructure:"host"`
	ReadOnly bool   `json:"readonly,omitempty" mapstructure:"readonly"`
}

// Map is a list of mounts.
type Map struct {
	mounts []Mount
}

// Mounts returns the map's mounts.
func (m *Map) Mounts() []Mount { return append([]Mount(nil), m.mounts...) }

package orchestrator

import (
	"path/filepath"
	"slices"

	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/policy"
)

// OwnPlaces returns Paddock's own places a session opened with cfg is kept from, on every
// transport: package place's (the defaults of this host), those its opener adds in Policy.Own (a daemon's
// state directory and socket), its audit file and its kernel's listening directory (the
// key it attaches with).
func OwnPlaces(cfg Config) policy.Own {
	o := policy.Own{ConfigDir: place.ConfigDir(), Secret: place.Secret(), Sockets: place.Sockets(), Protected: place.Protected()}
	if cfg.Policy.Own.ConfigDir != "" {
		o.ConfigDir = cfg.Policy.Own.ConfigDir
	}
	o.Secret = append(o.Secret, cfg.Policy.Own.Secret...)
	o.Sockets = append(o.Sockets, cfg.Policy.Own.Sockets...)
	o.Protected = append(o.Protected, cfg.Policy.Own.Protected...)
	for _, p := range []string{auditFile(cfg), cfg.Listen} {
		if p != "" {
			o.Secret = append(o.Secret, p)
		}
	}
	for _, l := range []*[]string{&o.Secret, &o.Sockets, &o.Protected} {
		*l = slices.Compact(slices.Sorted(slices.Values(*l)))
	}
	return o
}

// auditFile is where a session records its verdicts: Policy.AuditFile, else audit.jsonl in
// its state directory when it has one; "" for none.
func auditFile(cfg Config) string {
	if cfg.Policy.AuditFile == "" && cfg.StateDir != "" {
		return filepath.Join(cfg.StateDir, "audit.jsonl")
	}
	return cfg.Policy.AuditFile
}

package orchestrator

import (
	"os"
	"slices"
)

// hostFacts are what a session's policy locates the host's guarded paths by: the host's
// home directory, the host's own environment (its credential variables, config directory
// and PATH), Paddock's config directory and the further secret entries. A root session
// takes them from the host process; a child takes its parent's, never the environment it
// was spawned with, which its parent's sandbox may have chosen (session.spawn with
// HOME=/nonexistent must not move the secret set).
func (s *Session) hostFacts() (home string, envs [][]string, configDir string, secrets []string) {
	if p := s.parent; p != nil && p.pgate != nil {
		pc := p.pgate.pctx
		home = pc.Home
		if home == "" {
			home = pc.Getenv("HOME")
		}
		envs = append(slices.Clone(pc.HostEnv), pc.Env)
		return home, envs, pc.ConfigDir, pc.Secrets
	}
	return "", [][]string{os.Environ()}, "", nil
}

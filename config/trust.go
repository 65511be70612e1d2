package config

import "strings"

// trustedOnly are the settings a project's own .paddock/settings file can never set: where
// kernels run, what runs unasked, which remote hosts may be read. Keys are lower case, as
// viper keeps them; a prefix covers every key below it.
var trustedOnly = []string{"kerneltransport", "shell.autoeffects", "shell.rules", "ssh"}

// ProjectMay reports whether a project's settings may set key (dotted, any case).
func ProjectMay(key string) bool {
	key = strings.ToLower(key)
	for _, t := range trustedOnly {
		if key == t || strings.HasPrefix(key, t+".") {
			return false
		}
	}
	return true
}

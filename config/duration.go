package config

import (
	"fmt"
	"strings"
	"time"
)

// ParseDuration reads a duration setting: "30s", "5m", a bare number of seconds, "-1" for
// no limit.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "-1" {
		return -1, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	var secs float64
	if _, err := fmt.Sscanf(v, "%g", &secs); err == nil {
		return time.Duration(secs * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%q is not a duration (e.g. 30s, 5m)", v)
}

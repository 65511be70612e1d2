package client

import (
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
)

// Option is one of a session's options as a front end takes it: its name, as paddock's
// flags name it (transport, image, mount, max-bytes, … : api.OptionKeys), and its values,
// one or (a list: mount, env) several.
type Option struct {
	Name   string
	Values []string
}

// OpenRequest is the request that opens a session in workspace (a host path of the
// daemon's) with opts, as the daemon would read the same options on its own command line:
// transport, wrap, mount and allow-net fill the request's fields (egress-via-host is egress
// proxy), every other option sets its settings
// key (a list joined by commas). An option a request cannot carry (a transport option with
// no settings key) is an invalid argument: it belongs in the daemon's settings.
func OpenRequest(workspace string, opts ...Option) (api.OpenRequest, error) {
	req := api.OpenRequest{Workspace: workspace, Settings: map[string]string{}}
	keys := api.OptionKeys()
	for _, o := range opts {
		one := strings.Join(o.Values, ",")
		switch o.Name {
		case "transport":
			req.Transport = one
		case "wrap":
			req.Wrap = one
		case "mount":
			req.Mounts = o.Values
		case "allow-net":
			req.AllowNet = append(req.AllowNet, o.Values...)
		case "egress-via-host":
			if one == "true" {
				req.Settings[keys["egress"]] = "proxy" // what the flag stands for
			}
		default:
			key, ok := keys[o.Name]
			if !ok {
				return req, errdefs.New(errdefs.InvalidArgument, "usage",
					fmt.Sprintf("--%s cannot be passed to a daemon's session; set it in the daemon's settings", o.Name))
			}
			req.Settings[key] = one
		}
	}
	return req, nil
}

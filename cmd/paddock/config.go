package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newConfigCmd) }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective settings",
	}
	var workspace string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show [--workspace DIR] [--json]",
		Short: "Print every effective setting and where its value came from",
		Long: `Show prints every setting as a session in the workspace (default: the current directory)
would have it, each with its source: a flag, a PADDOCK_* environment variable, the global
settings file, the project's .paddock/settings file, or the default. A key the project's file
may not set is ignored with a warning naming it.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workspace == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workspace = wd
			}
			l, err := loadSettings(workspace, cmd.Flags(), withKeys(runKeys, transportKeys), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			vals, err := settingValues(l.Settings)
			if err != nil {
				return err
			}
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range vals {
					if !yield(k) {
						return
					}
				}
			})
			source := func(k string) string {
				if s := l.Sources[strings.ToLower(k)]; s != "" {
					return s
				}
				return "default"
			}
			if asJSON {
				type entry struct {
					Key    string `json:"key"`
					Value  any    `json:"value"`
					Source string `json:"source"`
				}
				out := []entry{}
				for _, k := range keys {
					out = append(out, entry{k, vals[k], source(k)})
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
			for _, k := range keys {
				b, _ := json.Marshal(vals[k])
				fmt.Fprintf(tw, "%s\t%s\t%s\n", k, b, source(k))
			}
			return tw.Flush()
		},
	}
	f := show.Flags()
	f.StringVarP(&workspace, "workspace", "w", "", "the project whose settings apply (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print a JSON list of {key, value, source}")
	var tf transportFlags
	tf.register(f)
	registerRunSettings(f)
	cmd.AddCommand(show)
	return cmd
}

// settingValues flattens the settings into dotted keys (as the settings files spell them)
// and their values; a list stays whole.
func settingValues(s any) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok {
				walk(key, sub)
				continue
			}
			out[key] = v
		}
	}
	walk("", m)
	return out, nil
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
)

// The subcommands of machina cloud that talk to a running cloud.

const defaultCloudURL = "http://127.0.0.1:8787"

func cloudURLFlag(cmd *cobra.Command, url *string) {
	def := os.Getenv("MACHINA_CLOUD_URL")
	if def == "" {
		def = defaultCloudURL
	}
	cmd.Flags().StringVar(url, "url", def, "URL of the running cloud (default: $MACHINA_CLOUD_URL, then "+defaultCloudURL+")")
}

func cloudClient(url string) (*client.Client, error) {
	c, err := client.New(url, client.Options{MaxRetries: 2})
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("--url: %w", err)}
	}
	return c, nil
}

func parseTagFlags(tags []string) (map[string]string, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, &ExitError{Code: 2, Err: fmt.Errorf("--tag %q: want KEY=VALUE", t)}
		}
		out[k] = v
	}
	return out, nil
}

func newCloudFaultCommand() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "fault",
		Short: "Add, list and clear faults of a running cloud",
		Long:  "Add, list and clear the faults of a running simulated cloud.\n\n" + api.FaultSpecHelp,
	}
	add := &cobra.Command{
		Use:     "add SPEC...",
		Short:   "Inject faults",
		Example: "  machina cloud fault add throttle,op=DescribeInstances,retry-after=2 node-not-ready,tag=pool=a",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cloudClient(url)
			if err != nil {
				return err
			}
			for _, spec := range args {
				f, err := api.ParseFaultSpec(spec)
				if err != nil {
					return &ExitError{Code: 2, Err: err}
				}
				created, err := c.CreateFault(cmd.Context(), f)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), created.FaultID)
			}
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the active faults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cloudClient(url)
			if err != nil {
				return err
			}
			faults, err := c.DescribeFaults(cmd.Context())
			if err != nil {
				return err
			}
			printFaults(cmd.OutOrStdout(), faults)
			return nil
		},
	}
	clear := &cobra.Command{
		Use:   "clear [FAULT-ID...]",
		Short: "Remove the given faults, or all of them",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cloudClient(url)
			if err != nil {
				return err
			}
			var n int
			if len(args) == 0 {
				n, err = c.ClearFaults(cmd.Context())
			} else {
				n, err = c.DeleteFaults(cmd.Context(), args...)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d fault(s) removed\n", n)
			return nil
		},
	}
	for _, sub := range []*cobra.Command{add, list, clear} {
		cloudURLFlag(sub, &url)
		cmd.AddCommand(sub)
	}
	return cmd
}

func printFaults(out io.Writer, faults []api.Fault) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKIND\tOPERATION\tRATE\tCOUNT\tFIRED\tSCOPE\tDETAIL")
	for _, f := range faults {
		op, rate, count := f.Operation, "1", "-"
		if op == "" {
			op = "*"
		}
		if f.Rate > 0 {
			rate = fmt.Sprint(f.Rate)
		}
		if f.Count > 0 {
			count = fmt.Sprint(f.Count)
		}
		var scope []string
		scope = append(scope, f.InstanceIDs...)
		var keys []string
		for k := range f.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			scope = append(scope, k+"="+f.Tags[k])
		}
		if len(scope) == 0 {
			scope = []string{"*"}
		}
		var detail string
		switch f.Kind {
		case api.FaultError:
			detail = fmt.Sprintf("status %d", f.StatusCode)
		case api.FaultLatency:
			detail = fmt.Sprintf("%dms", f.LatencyMillis)
		case api.FaultThrottle:
			detail = fmt.Sprintf("retry after %ds", f.RetryAfterSeconds)
		case api.FaultCapacity:
			detail = strings.TrimSpace(f.Zone + " " + f.InstanceType)
		case api.FaultNodeCondition:
			detail = f.ConditionType + "=" + f.ConditionStatus
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", f.FaultID, f.Kind, op, rate, count, f.Fired, strings.Join(scope, ","), detail)
	}
	_ = w.Flush()
}

func newCloudKillCommand() *cobra.Command {
	var url string
	var tags []string
	cmd := &cobra.Command{
		Use:   "kill [INSTANCE-ID...]",
		Short: "Terminate instances at once, behind their owners' backs",
		Long: `Kill instances of a running cloud: they go straight to terminated (state reason
Server.InjectedKill) and, with a kubelet, their Nodes are removed. Select by IDs and/or
--tag KEY=VALUE.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTagFlags(tags)
			if err != nil {
				return err
			}
			c, err := cloudClient(url)
			if err != nil {
				return err
			}
			killed, err := c.KillInstances(cmd.Context(), api.KillInstancesRequest{InstanceIDs: args, Tags: t})
			if err != nil {
				return err
			}
			for _, k := range killed {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s -> %s\n", k.InstanceID, k.PreviousState, k.CurrentState)
			}
			return nil
		},
	}
	cloudURLFlag(cmd, &url)
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "select instances carrying KEY=VALUE (repeatable)")
	return cmd
}

func newCloudInstancesCommand() *cobra.Command {
	var url string
	var tags []string
	cmd := &cobra.Command{
		Use:   "instances",
		Short: "List the instances of a running cloud",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := parseTagFlags(tags)
			if err != nil {
				return err
			}
			c, err := cloudClient(url)
			if err != nil {
				return err
			}
			l, err := c.DescribeInstances(cmd.Context(), api.DescribeInstancesRequest{Tags: t})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATE\tTYPE\tZONE\tPRIVATE-IP\tLAUNCHED\tTAGS")
			for _, i := range l {
				var kv []string
				for k, v := range i.Tags {
					kv = append(kv, k+"="+v)
				}
				sort.Strings(kv)
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i.InstanceID, i.State, i.InstanceType, i.Zone,
					i.PrivateIP, i.LaunchTime.Format("15:04:05"), strings.Join(kv, ","))
			}
			return w.Flush()
		},
	}
	cloudURLFlag(cmd, &url)
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "only instances carrying KEY=VALUE (repeatable; VALUE * matches any)")
	return cmd
}

func newCloudStatsCommand() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Print the call counters of a running cloud (JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cloudClient(url)
			if err != nil {
				return err
			}
			st, err := c.Stats(cmd.Context())
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		},
	}
	cloudURLFlag(cmd, &url)
	return cmd
}

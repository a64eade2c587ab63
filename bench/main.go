// Command bench measures machina's scale scenarios on this machine and prints the figures
// the issues ask for. It is not a test: nothing here passes or fails on time.
//
//	go run ./bench mapi-scale -n 100 -n 1000
//	go run ./bench mapi-scale -platform aws -n 100  # the same through the AWS actuator and the EC2 front
//	go run ./bench mapi-scale -platform aws -machine-api upstream -n 100  # under machine-api-operator's controllers
//	go run ./bench compare mapi-scale -platform aws -n 1000  # machina, then machine-api-operator, and the ratios
//	go run ./bench mapi-scale -platform aws -max-provisioning 50 -n 1000  # at most 50 Machines provisioning at once
//	go run ./bench mapi-scale -platform aws -manager-flag=--max-concurrent-reconciles=1 -n 100  # one Machine at a time, as machine-api-operator on AWS
//	go run ./bench mapi-scale -platform aws -fault throttle,rate=0.05 -n 1000  # 5 % of EC2 calls answered RequestLimitExceeded
//	go run ./bench capi-scale -n 1000
//	go run ./bench capi-scale -core upstream -n 1000  # the simulated provider under the upstream Cluster API core
//	go run ./bench capi-scale -core upstream -provider trivial -n 1000  # the upstream core's own floor
//	go run ./bench capi-scale -platform aws -n 1000  # AWSMachines through the upstream CAPA controller and the EC2 front
//	go run ./bench compare capi-scale -platform aws -n 1000  # the same under machina's core, then the upstream core
//	go run ./bench migrate -n 500        # machina migrate --all: 500 mirrored Machines and their MachineSets to the Cluster API
//	go run ./bench migrate -n 500 -max-in-flight 1000  # the same with every handover under way at once
//	go run ./bench migrate -platform aws -n 100  # the same with AWS Machines, until the upstream CAPA controller has taken them
//	go run ./bench sync-latency -n 1000  # spec change → mirror updated, p50/p99, among 1000 mirrored Machines
//	go run ./bench mirror -n 1000        # first mirroring: the sync starts after 1000 Machine API Machines are Running
//	go run ./bench soak -duration 10m -machines 60 -seed 1  # random traffic, kills and faults; checks invariants
//	go run ./bench soak -upstream -duration 10m -seed 1  # the same beside machine-api-operator, the upstream core and CAPA
//
// Each run starts a fresh lab (etcd + kube-apiserver), the simulated cloud with zero delays
// and its kubelet in this process, and `machina manager` as a child process, so the
// manager's own peak memory and API writes can be read separately.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/machina-dev/machina/internal/cli"
	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/fleet"
	"github.com/machina-dev/machina/internal/lab"
)

type intList []int

func (l *intList) String() string { return fmt.Sprint(*l) }
func (l *intList) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err == nil {
		*l = append(*l, n)
	}
	return err
}

func main() {
	// The manager child process is this binary too.
	if len(os.Args) > 1 && os.Args[1] == "manager" {
		os.Exit(cli.Execute())
	}
	if len(os.Args) < 2 {
		usage()
	}
	scenario, args := os.Args[1], os.Args[2:]
	if scenario == "soak" {
		os.Exit(soakMain(args))
	}
	comparing := scenario == "compare"
	if comparing {
		if len(args) == 0 || compareSides[args[0]] == nil {
			fmt.Fprintln(os.Stderr, "usage: go run ./bench compare {mapi-scale -platform aws|capi-scale [-platform aws]} [-n N]...")
			os.Exit(2)
		}
		scenario, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet(scenario, flag.ExitOnError)
	var sizes intList
	fs.Var(&sizes, "n", "number of Machines (repeatable)")
	fs.StringVar(&platform, "platform", "sim", "mapi-scale, capi-scale and migrate: the platform, sim or aws (the EC2 front; mapi-scale runs the AWS actuator, "+
		"capi-scale the upstream CAPA controller as the provider, and migrate waits until CAPA has taken over every Machine)")
	fs.DurationVar(&heartbeat, "heartbeat", productionHeartbeat, "how often the simulated kubelets renew their Node Leases: "+
		productionHeartbeat.String()+" as in a production cluster (the lab then uses a Node grace period of 4× this), or the lab's "+
		lab.KubeletHeartbeatInterval.String()+" (tests see node failure within seconds; at a thousand Nodes that is 500 Lease writes a second, "+
		"most of what this benchmark would measure)")
	fs.StringVar(&core, "core", "machina", "capi-scale: whose Cluster API core controllers run, machina's or \"upstream\" (the Cluster API "+
		lab.ClusterctlVersion+" core manager, built once from the pinned module into the lab's cache)")
	fs.StringVar(&infraProvider, "provider", "sim", "capi-scale: the infrastructure provider, machina's simulated one or \"trivial\" "+
		"(a Node and a providerID per SimMachine at once, no cloud, no kubelet: what the core alone costs)")
	fs.IntVar(&maxInFlight, "max-in-flight", fleet.DefaultMaxInFlight, "migrate: machina migrate's --max-in-flight (the benchmark runs the command itself)")
	fs.StringVar(&machineAPI, "machine-api", "machina", "mapi-scale -platform aws: whose Machine API controllers run, machina's or \"upstream\" "+
		"(machine-api-operator's machineset, machine-healthcheck and nodelink-controller commands and its Machine controller with machina's EC2 actuator)")
	fs.BoolVar(&auditWrites, "audit", false, "mapi-scale: count the Machine API controllers' writes from the API server's audit log too "+
		"(always with -machine-api upstream and in compare)")
	fs.Var(&managerEnv, "manager-env", "KEY=VALUE in the manager process's environment only, e.g. GOMEMLIMIT=64MiB (repeatable; "+
		"the benchmark's own environment reaches every process: etcd, kube-apiserver, the cloud)")
	fs.Var(&managerFlags, "manager-flag", "a flag for the manager's command line, e.g. --max-concurrent-reconciles=1 (repeatable)")
	fs.Var(&faultSpecs, "fault", "mapi-scale: a cloud fault during the scale-up, e.g. throttle,rate=0.05 (5 % of calls answered RequestLimitExceeded on EC2; repeatable). "+
		strings.ReplaceAll(api.FaultSpecHelp, "\n", " "))
	fs.BoolVar(&withFloor, "floor", true, "mapi-scale, capi-scale, mirror and migrate on sim: run the scenario's floor (the same writes sent by the benchmark, no manager) "+
		"at the same N right after each run and print the ratio of the two")
	fs.DurationVar(&bootDelay, "boot", 0, "how long the simulated cloud's instances stay pending before they run (0: they run at once; EC2's instances take about 10–30 s)")
	fs.IntVar(&maxProvisioning, "max-provisioning", 0, "mapi-scale: the MachineSet's machina.dev/max-provisioning limit (0: none)")
	_ = fs.Parse(args)
	if (core != "machina" && core != "upstream") || (infraProvider != "sim" && infraProvider != "trivial") {
		fmt.Fprintf(os.Stderr, "bench %s: -core is machina or upstream, -provider sim or trivial\n", scenario)
		os.Exit(2)
	}
	if (core != "machina" || infraProvider != "sim") && scenario != "capi-scale" {
		fmt.Fprintf(os.Stderr, "bench %s: -core and -provider are capi-scale's\n", scenario)
		os.Exit(2)
	}
	if machineAPI != "machina" && (machineAPI != "upstream" || scenario != "mapi-scale" || platform != "aws") {
		fmt.Fprintf(os.Stderr, "bench %s: -machine-api upstream is mapi-scale's, with -platform aws (machine-api-operator's Machine controller runs the EC2 actuator)\n", scenario)
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard())
	if platform != "sim" && !platformScenarios[scenario] {
		fmt.Fprintf(os.Stderr, "bench %s: -platform %s: only mapi-scale, capi-scale and migrate run on another platform than sim\n", scenario, platform)
		os.Exit(2)
	}
	if len(sizes) == 0 {
		sizes = intList{100}
	}
	run, ok := scenarios[scenario]
	if !ok {
		usage()
	}
	if comparing {
		os.Exit(compare(scenario, sizes))
	}
	floor, hasFloor := floors[scenario]
	hasFloor = hasFloor && withFloor && platform == "sim" && core == "machina" && infraProvider == "sim"
	var rows []result
	code := 0
	for _, n := range sizes {
		r, err := run(n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench %s -n %d: %v\n", scenario, n, err)
			os.Exit(1)
		}
		if hasFloor {
			// The run's figures stand whether or not its floor completes: at a size the box
			// cannot hold (5,000 Nodes renewing Leases every 10 s on two cores) the floor's
			// Nodes can fall NotReady faster than it brings them up.
			if err := againstFloor(&r, floor); err != nil {
				fmt.Fprintf(os.Stderr, "bench %s -n %d: %v\n", scenario, n, err)
				r.Lines = append(r.Lines, fmt.Sprintf("floor (%s): did not complete: %v", floor, err))
				code = 1
			}
		}
		rows = append(rows, r)
	}
	printTable(scenario, rows)
	os.Exit(code)
}

// heartbeat is the -heartbeat flag: the simulated kubelets' Lease renewal interval. The soak
// keeps the lab's.
var heartbeat = lab.KubeletHeartbeatInterval

// productionHeartbeat is a production kubelet's Lease renewal interval, the scenarios' default.
const productionHeartbeat = 10 * time.Second

// managerEnv is the -manager-env flag: variables set in the manager's process only.
var managerEnv envList

type envList []string

func (l *envList) String() string { return strings.Join(*l, " ") }
func (l *envList) Set(s string) error {
	if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	*l = append(*l, s)
	return nil
}

// managerFlags is the -manager-flag flag: more of the manager's command line.
var managerFlags flagList

type flagList []string

func (l *flagList) String() string { return strings.Join(*l, " ") }
func (l *flagList) Set(s string) error {
	if !strings.HasPrefix(s, "--") {
		return fmt.Errorf("%q: want --name=value", s)
	}
	*l = append(*l, s)
	return nil
}

// withFloor is the -floor flag.
var withFloor = true

// floors names each scenario's floor.
var floors = map[string]string{"mapi-scale": "mapi-floor", "capi-scale": "capi-floor", "mirror": "mirror-floor", "migrate": "migrate-floor"}

// againstFloor runs floor at r's N and adds to r a line with the floor's figures and r's
// ratio to them: seconds and writes per Machine, measured in the same sitting.
func againstFloor(r *result, floor string) error {
	fmt.Fprintf(os.Stderr, "bench: this run %.1f s, %.2f writes per Machine; now %s -n %d, for the ratio\n",
		r.Seconds, float64(r.ManagerWrites)/float64(r.N), floor, r.N)
	f, err := scenarios[floor](r.N)
	if err != nil {
		return fmt.Errorf("%s: %w", floor, err)
	}
	r.Lines = append(r.Lines, fmt.Sprintf("floor (%s, right after): %.1f s, %.2f writes per Machine; this run: %.2f× its seconds, %.2f× its writes",
		floor, f.Seconds, float64(f.ManagerWrites)/float64(f.N), r.Seconds/f.Seconds, float64(r.ManagerWrites)/float64(max(f.ManagerWrites, 1))))
	// Where the floor's time went, to set beside this run's (the manager's own CPU is on
	// the same cores as the apiserver's here).
	for _, l := range f.Lines {
		if strings.HasPrefix(l, "CPU-seconds") || strings.HasPrefix(l, "apiserver requests") {
			r.Lines = append(r.Lines, "  the floor's "+l)
		}
	}
	return nil
}

// bootDelay is the -boot flag: the cloud's pending time.
var bootDelay time.Duration

// maxProvisioning is mapi-scale's -max-provisioning: the MachineSet's limit.
var maxProvisioning int

// platform is the -platform flag, read by the scenarios of platformScenarios.
var platform = "sim"

// maxInFlight is migrate's -max-in-flight: machina migrate's own flag.
var maxInFlight = fleet.DefaultMaxInFlight

var platformScenarios = map[string]bool{"mapi-scale": true, "capi-scale": true, "migrate": true}

var scenarios = map[string]func(n int) (result, error){
	"mapi-scale":    mapiScale,
	"capi-scale":    capiScale,
	"capi-rollout":  capiRollout,
	"migrate":       migrateScale,
	"sync-latency":  syncLatency,
	"mirror":        mirrorScale,
	"capi-floor":    capiFloor,
	"mapi-floor":    mapiFloor,
	"mirror-floor":  mirrorFloor,
	"migrate-floor": migrateFloor,
}

func usage() {
	var names []string
	for k := range scenarios {
		names = append(names, k)
	}
	fmt.Fprintf(os.Stderr, "usage: go run ./bench {%s} [-n N]...\n", strings.Join(names, "|"))
	os.Exit(2)
}

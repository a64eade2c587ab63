# machina developer targets. The README's two commands need none of these.
CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN = go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT = go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# Where the +kubebuilder:rbac markers of each generated role live (config/config_test.go reads
# these two lines): machina's provider-agnostic controllers, and the simulated provider.
MANAGER_RBAC_PATHS = paths=./internal/controllers/machineapi/... paths=./internal/controllers/aws/... paths=./internal/controllers/clusterapi/... paths=./internal/controllers/sync/... paths=./internal/controllers/migration/... paths=./internal/manager/... paths=./internal/authorityhook/... paths=./internal/events/... paths=./internal/ocpconfig/...
SIM_RBAC_PATHS = paths=./internal/controllers/sim/...

IMAGE ?= machina:latest
CONTAINER_ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)

.PHONY: all build test generate rbac crds tools-mod mao-mod prometheus-mod lab-binaries verify lint image

all: build

build: ## build bin/machina
	go build -o bin/machina ./cmd/machina

# The README's test command. -vet=off: `make verify` vets every package already. -ldflags=-w:
# test binaries without DWARF link in about 60% of the time (the migration package's: 17.1 s ->
# 10.8 s), and a suite links some sixty of them. -p 3: most packages mostly wait on their lab,
# so three at a time keep two cores busier (README).
test: ## the README's test command
	go test -p 3 -count=1 -vet=off -ldflags=-w -timeout 45m ./...

generate: rbac ## deepcopy and CRDs of the simulated provider's API types, and the RBAC roles
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=config/crd/sim

rbac: ## config/rbac/role.yaml and config/sim/role.yaml from the controllers' +kubebuilder:rbac markers
	$(CONTROLLER_GEN) rbac:roleName=machina-manager $(MANAGER_RBAC_PATHS) output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=machina-sim-provider $(SIM_RBAC_PATHS) output:rbac:artifacts:config=config/sim

image: ## build the container image $(IMAGE) with podman or docker (Containerfile)
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: neither podman nor docker is installed"; exit 1; }
	$(CONTAINER_ENGINE) build -f Containerfile -t $(IMAGE) .

crds: ## refresh config/crd/upstream from the modules go.mod pins
	go run ./hack/crdsync

tools-mod: ## re-tidy the control-plane tools module and refresh the lab's embedded copy
	cd hack/tools && go mod tidy
	cp hack/tools/go.mod internal/lab/toolsmod/go.mod.txt
	cp hack/tools/go.sum internal/lab/toolsmod/go.sum.txt

# mao-mod re-tidies the lab's embedded machine-api-operator module in a scratch copy (it has no
# directory of its own: its tool directives name the commands). MAO_VERSION=<pseudo-version>
# moves it to another revision first; MAOVersion in internal/lab/maobuild.go must follow.
mao-mod: ## re-tidy the lab's embedded machine-api-operator module (internal/lab/maomod)
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	cp internal/lab/maomod/go.mod.txt "$$d/go.mod" && cp internal/lab/maomod/go.sum.txt "$$d/go.sum" && \
	( cd "$$d" && export GOWORK=off GOFLAGS=-mod=mod && \
	  if [ -n "$(MAO_VERSION)" ]; then go get github.com/openshift/machine-api-operator@$(MAO_VERSION); fi && \
	  go mod tidy ) && \
	cp "$$d/go.mod" internal/lab/maomod/go.mod.txt && cp "$$d/go.sum" internal/lab/maomod/go.sum.txt

# prometheus-mod re-tidies the module promtool is built from (internal/lab/prometheusmod), the
# same way; PROMETHEUS_VERSION=v0.MAJORMINOR.PATCH moves it to another Prometheus release
# first, and PrometheusVersion in internal/lab/promtool.go must follow.
prometheus-mod: ## re-tidy the module of the promtool that checks config/prometheus's rules
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	cp internal/lab/prometheusmod/go.mod.txt "$$d/go.mod" && cp internal/lab/prometheusmod/go.sum.txt "$$d/go.sum" && \
	( cd "$$d" && export GOWORK=off GOFLAGS=-mod=mod && \
	  if [ -n "$(PROMETHEUS_VERSION)" ]; then go get github.com/prometheus/prometheus@$(PROMETHEUS_VERSION); fi && \
	  go mod tidy ) && \
	cp "$$d/go.mod" internal/lab/prometheusmod/go.mod.txt && cp "$$d/go.sum" internal/lab/prometheusmod/go.sum.txt

lab-binaries: ## build (or find) the cached etcd / kube-apiserver / kube-controller-manager
	go run ./cmd/machina lab-binaries

lint: ## golangci-lint with .golangci.yml, pinned
	$(GOLANGCI_LINT) run ./...

verify: ## tidy go.mod, vet, golangci-lint (.golangci.yml), and no stale generated files or upstream CRDs
	go mod tidy -diff
	go vet ./...
	$(GOLANGCI_LINT) run ./...
	go run ./hack/crdsync -check
	go test -count=1 ./config/... ./internal/lab -run 'Upstream|SimCRDs|ToolsModule|MAOModule|PrometheusModule|PrometheusRuleAlerts|RBACUpToDate|Wildcard|ContainerfileGo'

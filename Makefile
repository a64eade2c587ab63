# machina developer targets. The README's two commands need none of these.
CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN = go run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

.PHONY: all build test generate crds tools-mod lab-binaries verify

all: build

build: ## build bin/machina
	go build -o bin/machina ./cmd/machina

test: ## the README's test command
	go test -count=1 -timeout 45m ./...

generate: ## deepcopy and CRDs of the simulated provider's API types
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=config/crd/sim

crds: ## refresh config/crd/upstream from the modules go.mod pins
	go run ./hack/crdsync

tools-mod: ## re-tidy the control-plane tools module and refresh the lab's embedded copy
	cd hack/tools && go mod tidy
	cp hack/tools/go.mod internal/lab/toolsmod/go.mod.txt
	cp hack/tools/go.sum internal/lab/toolsmod/go.sum.txt

lab-binaries: ## build (or find) the cached etcd / kube-apiserver / kube-controller-manager
	go run ./cmd/machina lab-binaries

verify: ## fail if generated files or upstream CRDs are stale
	go run ./hack/crdsync -check
	go test ./config/... ./internal/lab -run 'Upstream|SimCRDs|ToolsModule'

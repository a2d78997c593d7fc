# Lifeboat's entry points. `make demo` and `make test` are the two commands a
# newcomer needs; the rest are building blocks.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin/lifeboat
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/lifeboat-io/lifeboat/internal/buildinfo.Version=$(VERSION)

.PHONY: build generate verify lint test test-modules test-race-fuzz test-race test-unit fuzz cluster demo bench tools cluster-tools s3-tools velero-cli lint-tools node-tools node-packages csi-tools test-tools clean image image-deps need-root

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/lifeboat

# The container images, built without a container engine by hack/tools/image
# (docs/images.md): lifeboat, one per example plugin, pause, the demo writer
# and the tests' shell, each a multi-platform OCI archive bin/images/<image>.tar for
# `ctr -n k8s.io images import --all-platforms`. Prints each reference and
# digest. IMAGE_PLATFORMS=linux/amd64 (or local) builds one platform;
# CONTAINERD_ADDRESS=/run/containerd/containerd.sock also imports them.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_REPO ?= ghcr.io/lifeboat-io
CONTAINERD_ADDRESS ?=
image: image-deps
	cd hack/tools/image && GOWORK=off $(GO) run . -root "$(CURDIR)" -version "$(VERSION)" \
	  -platforms "$(IMAGE_PLATFORMS)" -repo "$(IMAGE_REPO)" -tar "$(CURDIR)/bin/images" $(if $(CONTAINERD_ADDRESS),-import-address "$(CONTAINERD_ADDRESS)")

# The images carry the machine's CA certificates and, in the tests' shell
# image, its static busybox (Debian's packages).
image-deps:
	@[[ -f /etc/ssl/certs/ca-certificates.crt && -x /bin/busybox ]] || { apt-get update && apt-get install -y --no-install-recommends ca-certificates busybox-static; }

# Deepcopy code and CRD manifests (config/crd and the chart's copy), from the
# api/ markers, by a pinned controller-gen.
generate:
	cg=$$(hack/gotool.sh controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen); \
	$$cg object:headerFile=hack/boilerplate.go.txt paths=./api/... ; \
	$$cg crd:crdVersions=v1 paths=./api/... output:crd:artifacts:config=config/crd/bases
	# The Helm chart carries the same CRDs (Helm applies crds/ itself).
	rm -f charts/lifeboat/crds/*.yaml && cp config/crd/bases/*.yaml charts/lifeboat/crds/
	gofmt -w api
	hack/protoc.sh

# Fails when the committed tree is stale: `make generate` must change nothing
# (deepcopy, CRDs, protobuf stubs) and every module's go.mod must be tidy.
verify:
	hack/verify.sh

# The pinned golangci-lint with .golangci.yml (vet, staticcheck, unchecked
# errors, dead code, spelling, gofmt/goimports formatting) over our own
# modules: the main one, the Velero-SDK plugin, the CSI sanity test and the
# image builder. A run waits for another golangci-lint on the machine
# instead of failing.
LINT_MODULES := . test/compat test/csisanity hack/tools/image
lint:
	gl=$$(hack/gotool.sh golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint); \
	for m in $(LINT_MODULES); do (cd $$m && GOWORK=off $$gl run --allow-serial-runners ./...); done

# The pinned local API server, etcd and S3 server that the tests start, and
# Velero v1.18.3's CLI that test/velerocli runs (test/incluster runs its
# server) and its file-system backup code that test/velerokopia and
# test/incluster drive (built once per go.sum of test/compat, one after the
# other since they share its build cache; cold, about 5.5 minutes on two
# cores), then Velero's AWS object store plugin (hack/tools/velero-plugin-for-aws),
# which test/incluster gives Velero's server.
tools: cluster-tools s3-tools velero-cli
cluster-tools:
	hack/cluster-bins.sh >/dev/null
s3-tools:
	hack/versitygw.sh >/dev/null
velero-cli:
	test/compat/build.sh velero >/dev/null
	test/compat/build.sh velerokopia >/dev/null
	hack/gotool.sh velero-plugin-for-aws github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws >/dev/null
lint-tools:
	hack/gotool.sh golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint >/dev/null

# The real node's parts: containerd, runc, CNI plugins and iptables from
# Debian, kubelet and the other node components from the pinned tools module.
# After cluster-tools, never beside it: both build hack/tools/kubernetes and
# share its build cache, so run together they would compile it twice.
node-tools: cluster-tools node-packages
	hack/node-bins.sh >/dev/null
node-packages:
	hack/node-packages.sh

# The CSI test stack's parts (internal/testutil/csistack): the
# external-snapshotter's snapshot-controller and csi-snapshotter and the
# external-provisioner's csi-provisioner from pinned tools modules, and the
# snapshot CRDs; kube-controller-manager comes from node-tools.
csi-tools:
	hack/csi-bins.sh >/dev/null

# Every tool make test needs. The Debian packages come first and one at a
# time (apt holds a lock); then the builds run three at a time: each script
# builds into its own cache directory under its own lock, and on a cold
# machine one build's module downloads and single-threaded links leave a core
# idle that another build fills (a cold make test took 52 minutes with them
# one after another).
test-tools: image-deps node-packages
	$(MAKE) -j3 tools node-tools csi-tools lint-tools

# Everything: the tree is what its sources generate, lint, unit, envtest,
# real-node (this machine's platform's images imported into it) and
# end-to-end tests, the Helm chart against `lifeboat install` (test/helm, a
# module of its own), the copy of Velero's CRDs the main module tests against
# (test/compat/crds: equal to the Velero module's), the test CSI driver
# against the CSI community's sanity suite (test/csisanity, a module of its
# own), the image builder's tests (they build every image for
# this machine's platform, and the lifeboat image for both), the race
# detector on the packages that share state between goroutines most, then
# each fuzz target briefly. The other modules' tests and the race lane run
# side by side (-O keeps each one's output together): each leaves a core
# mostly idle while it waits on its API server or single-threaded link (a
# cold run spent 4 minutes on the first and 7 on the second one after the
# other).
test: verify test-tools
	$(GO) vet ./...
	$(MAKE) lint
	$(MAKE) image IMAGE_PLATFORMS=local
	KUBEBUILDER_ASSETS=$$(hack/cluster-bins.sh) LIFEBOAT_NODE_BINS=$$(hack/node-bins.sh) LIFEBOAT_CSI_BINS=$$(hack/csi-bins.sh) \
	  LIFEBOAT_IMAGES=$(CURDIR)/bin/images $(GO) test -count=1 -timeout 30m ./...
	$(MAKE) -j2 -O test-modules test-race-fuzz

# The tests of the modules other than the main one.
test-modules:
	cd test/helm && GOWORK=off $(GO) test -count=1 -timeout 10m ./...
	cd test/compat && GOWORK=off $(GO) test -count=1 ./crds/
	cd test/csisanity && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./...
	cd hack/tools/image && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 -timeout 15m ./...

test-race-fuzz:
	$(MAKE) test-race
	$(MAKE) fuzz

RACE_PACKAGES := ./internal/deletion ./internal/pluginhost ./internal/controller
test-race: tools
	KUBEBUILDER_ASSETS=$$(hack/cluster-bins.sh) $(GO) test -race -count=1 -timeout 15m $(RACE_PACKAGES)

# The parsers of untrusted input, each fuzzed briefly (go test -fuzz takes
# one package and one target at a time). Their seeds, and any input that
# once failed (testdata/fuzz/), also run as plain tests in `make test`. By
# default each runs a number of inputs (about 10 s on an idle 2-core
# machine), not a time: with a time, Go 1.26's fuzzing coordinator can fail
# a target with "context deadline exceeded" and no failing input when a
# worker is slow to stop at the deadline (golang/go#75804, fixed in Go
# 1.27), which a loaded machine makes likely. FUZZTIME=30s (or 1000000x)
# sets every target's budget.
FUZZTIME ?=
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(or $(FUZZTIME),200000x) ./internal/archive
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(or $(FUZZTIME),100000x) ./pkg/policy
	$(GO) test -run '^$$' -fuzz '^FuzzSelectors$$' -fuzztime $(or $(FUZZTIME),70000x) ./internal/selection
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(or $(FUZZTIME),100000x) ./internal/listpage
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(or $(FUZZTIME),100000x) ./internal/jsonmap
	$(GO) test -run '^$$' -fuzz '^FuzzEncode$$' -fuzztime $(or $(FUZZTIME),100000x) ./internal/jsonmap
	$(GO) test -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(or $(FUZZTIME),30000x) ./internal/integrity

test-unit:
	$(GO) test -count=1 -short ./...

# A real single-node cluster (internal/localnode: control plane, containerd,
# kubelet, kube-proxy; needs root) with the images of `make image` imported
# and the CSI test stack (storage and snapshot class lifeboat-csi), in the
# foreground until interrupted, which removes everything it made.
# Writes an admin kubeconfig to .lifeboat/kubeconfig.
cluster: tools node-tools csi-tools
	$(MAKE) image IMAGE_PLATFORMS=local
	KUBEBUILDER_ASSETS=$$(hack/cluster-bins.sh) LIFEBOAT_NODE_BINS=$$(hack/node-bins.sh) LIFEBOAT_CSI_BINS=$$(hack/csi-bins.sh) \
	  $(GO) run ./hack/localcluster --node --csi --images bin/images --kubeconfig .lifeboat/kubeconfig

# The demo (hack/demo.sh): a real node (needs root, like `make cluster`) with
# this machine's images, Lifeboat installed in it with two example plugins, a
# stateful app backed up with a custom volume action, restored into a copy
# whose pod runs, and the backup deleted. Builds what it needs first.
demo: need-root node-tools tools image-deps build
	$(MAKE) image IMAGE_PLATFORMS=local
	KUBEBUILDER_ASSETS=$$(hack/cluster-bins.sh) LIFEBOAT_NODE_BINS=$$(hack/node-bins.sh) hack/demo.sh

need-root:
	@[[ $$(id -u) -eq 0 ]] || { echo "this target runs a real node (kubelet, containerd) and needs root: sudo make $(MAKECMDGOALS)" >&2; exit 1; }

bench: build
	KUBEBUILDER_ASSETS=$$(hack/cluster-bins.sh) bench/run.sh

clean:
	rm -rf bin .lifeboat

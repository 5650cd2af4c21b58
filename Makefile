# bridged — build, test and image targets. `make` lists them.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# HOME_DIR, when set, is the daemon's home; unset, `make run` uses the
# default every bridged command finds: $BRIDGED_HOME, else
# $XDG_DATA_HOME/bridged (~/.local/share/bridged).
HOME_DIR ?=
IMAGE   ?= bridged-agent:latest
# IMAGE_INPUTS is a hash of what the production agent image is built from
# (the Dockerfile, go.mod, go.sum and the Go files agent-runner is compiled
# from); `make image` labels the image with it, and `make run` rebuilds an
# image whose label differs. Computed only when a recipe uses it.
IMAGE_INPUTS = $(shell { cat Dockerfile go.mod go.sum; $(GO) list -deps -f '{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .EmbedFiles}}{{$$.Dir}}/{{.}} {{end}}{{end}}{{end}}' ./agent-runner | xargs cat; } | sha256sum | cut -c1-16)
TEST_TIMEOUT ?= 45m
# A binary built with -race sleeps a second before it exits unless told
# not to: every test binary, and every race-built daemon, CLI and fake the
# tests start, would pay it.
GORACE ?= atexit_sleep_ms=0
export GORACE
# BRIDGED_ENGINE=podman: `make image`, `make test-image` and `make run` use
# the user's rootless Podman (its socket, and the podman CLI), not Docker.
ENGINE_CLI := $(if $(filter podman,$(BRIDGED_ENGINE)),podman,docker)
ifeq ($(BRIDGED_ENGINE),podman)
export DOCKER_HOST ?= unix://$(or $(XDG_RUNTIME_DIR),/run/user/$(shell id -u))/podman/podman.sock
endif
# staticcheck is pinned and installed through the Go module proxy by `make
# tools` (lint runs it first); 0.8.2 is release 2026.2.2.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck
# deadcode (golang.org/x/tools/cmd/deadcode) is pinned and installed the
# same way; lint fails on a function no program of the module reaches,
# unless deadcode.allow names it with the reason it is kept.
DEADCODE_VERSION ?= v0.52.0
DEADCODE := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/deadcode
DEADCODE_MAINS := ./cmd/bridged ./agent-runner ./cmd/fakeclaude ./cmd/testimage

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help
.PHONY: podman-deps help build test test-all test-unit test-integration lint tools test-only-names cover bench test-image image agent-image image-reachable run install clean deps test-deps browser-deps

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-17s %s\n", $$1, $$2}'

build: ## build bin/bridged and bin/agent-runner (static)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/bridged ./cmd/bridged
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/agent-runner ./agent-runner

# The Docker tests build (or reuse, by content hash) the test image themselves,
# so test, test-integration and bench need no test-image step first.
# APT_INSTALL installs Debian packages, through sudo unless root.
APT_INSTALL = if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends $(1); \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends $(1); fi

deps: test-deps browser-deps podman-deps ## install what the tests need beyond Go and Docker (test-deps, browser-deps and podman-deps)

test-deps: ## install the static busybox the test image carries (Debian's busybox-static)
	@if ! dpkg-query -W -f='$${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then \
	  $(call APT_INSTALL,busybox-static); \
	fi

# The Podman tests (the engine suite, the boundary and exactly-once e2e
# tests on rootless Podman) find the service .ci/podman.sh starts; without
# it they skip saying so (CI=true fails them).
podman-deps: ## install Debian's podman, uidmap and slirp4netns and start a rootless Podman service as a scratch user (.ci/podman.sh)
	@if [ "$$(id -u)" = 0 ]; then .ci/podman.sh >/dev/null; \
	elif sudo -n true 2>/dev/null; then sudo .ci/podman.sh >/dev/null; \
	else echo "make: no root: the Podman tests skip unless a rootless Podman service answers (sudo .ci/podman.sh starts one)" >&2; fi

browser-deps: ## install chromium, for the dashboard's browser test only
	@if ! command -v chromium >/dev/null; then \
	  $(call APT_INSTALL,chromium); \
	fi

# The linters run beside the tests: the suite mostly waits on containers
# and timeouts, and the linters' minute or two of CPU fits in its gaps.
# The tests print as they go, the linters' findings after them; either one
# failing fails the target.
test: deps tools ## gofmt, vet, staticcheck and deadcode beside every test with -race, Docker end-to-end included
	@log=$$(mktemp); $(MAKE) --no-print-directory lint >"$$log" 2>&1 & lint=$$!; \
	rc=0; $(MAKE) --no-print-directory test-all || rc=$$?; \
	lrc=0; wait $$lint || lrc=$$?; \
	echo "--- make lint (run beside the tests):"; cat "$$log"; rm -f "$$log"; \
	if [ $$lrc -ne 0 ]; then echo "make lint failed"; fi; \
	[ $$rc -eq 0 ] && [ $$lrc -eq 0 ]

# -count=1: the e2e tests build the daemon themselves, out of sight of go
# test's result cache, so a cached e2e pass could hide a change to the product.
test-all: ## every test with -race, Docker end-to-end included, without the linters
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-unit: ## the tests that need no Docker
	BRIDGED_SKIP_DOCKER=1 $(GO) test -race ./...

test-integration: deps ## only the Docker end-to-end tests
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run 'Docker|E2E' ./...

tools: ## install the pinned staticcheck and deadcode (through the Go module proxy) unless they are there
	@if ! "$(STATICCHECK)" -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))'; then \
	  echo "installing staticcheck $(STATICCHECK_VERSION)"; \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || { \
	    echo "lint: staticcheck $(STATICCHECK_VERSION) could not be installed; it needs the Go module proxy:" >&2; \
	    echo "  go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)" >&2; exit 1; }; \
	fi
	@if ! $(GO) version -m "$(DEADCODE)" 2>/dev/null | grep -qE '^[[:space:]]+mod[[:space:]]+golang.org/x/tools[[:space:]]+$(DEADCODE_VERSION)[[:space:]]'; then \
	  echo "installing deadcode $(DEADCODE_VERSION)"; \
	  $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION) || { \
	    echo "lint: deadcode $(DEADCODE_VERSION) could not be installed; it needs the Go module proxy:" >&2; \
	    echo "  go install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)" >&2; exit 1; }; \
	fi

# The dead-code check runs from the programs' main functions, tests left out:
# a function only a test reaches is dead in the product. deadcode.allow keeps
# one on purpose per line ("package Func  reason"); an entry deadcode no
# longer reports fails too, so the list never outlives what it excuses.
lint: tools ## gofmt, go vet, staticcheck and deadcode; fails on any finding
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@found=$$($(DEADCODE) -f '{{range .Funcs}}{{$$.Path}} {{.Name}}{{"\n"}}{{end}}' $(DEADCODE_MAINS) | sed 's|^$(shell $(GO) list -m)/||' | sort -u); \
	allowed=$$(grep -vE '^[[:space:]]*(#|$$)' deadcode.allow | awk '{print $$1" "$$2}' | sort -u); \
	dead=$$(comm -23 <(echo "$$found") <(echo "$$allowed") | grep . || true); \
	stale=$$(comm -13 <(echo "$$found") <(echo "$$allowed") | grep . || true); \
	if [ -n "$$dead" ]; then echo "deadcode: unreachable from $(DEADCODE_MAINS); remove it, or keep it in deadcode.allow with the reason:"; echo "$$dead"; fi; \
	if [ -n "$$stale" ]; then echo "deadcode.allow names what deadcode no longer reports; remove the line:"; echo "$$stale"; fi; \
	[ -z "$$dead$$stale" ]
	@if command -v golangci-lint >/dev/null; then golangci-lint run; fi

test-only-names: ## list the exported names only tests use (by name: a report to prune from, never a failure)
	@$(GO) test -count=1 -run '^TestExportedUsedOnlyByTests$$' -v . | sed -n 's/^ *testonly_test.go:[0-9]*: //p'

# Every test binary and every program a test runs as a child process
# (agent-runner, the fake claude and, in the end-to-end tests, the daemon, all
# built with -cover) writes its counters to COVER_DIR; covdata then prints one
# figure per package over all of them.
COVER_DIR ?= $(CURDIR)/coverage
cover: deps ## per-package test coverage, counting the programs tests run as child processes (BRIDGED_SKIP_DOCKER=1: no Docker)
	rm -rf $(COVER_DIR) && mkdir -p $(COVER_DIR)
	@echo "go test -cover ./... (output in $(COVER_DIR).log)"
	@$(GO) test -cover -timeout $(TEST_TIMEOUT) ./... -args -test.gocoverdir=$(COVER_DIR) >$(COVER_DIR).log 2>&1 || { cat $(COVER_DIR).log; exit 1; }
	@$(GO) tool covdata percent -i=$(COVER_DIR) | grep -oE '[^[:space:]]+[[:space:]]+coverage: [0-9.]+%' | \
	  sed -E 's#^github.com/bridged-app/bridged/?##; s#[[:space:]]+coverage:##' | awk '{printf "%7s  %s\n", $$2, $$1}' | sort -k2

bench: test-deps ## print the performance figures of the README
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./... | grep -vE '^\s*\{|^(goos|goarch|pkg|cpu):|^PASS$$' 

test-image: test-deps ## build bridged-agent:test from static binaries (no registry needed)
	$(GO) run ./cmd/testimage -tag bridged-agent:test

# FALLBACK is what to do without Docker Hub and npm.
FALLBACK = echo "make:   make test-image && make run IMAGE=bridged-agent:test" >&2

# A failed build (no Docker Hub or npm: Docker's DNS error) ends with the
# way to run on the test image instead.
image: ## build the production agent image (needs Docker Hub and npm)
	@$(ENGINE_CLI) build --label bridged.inputs=$(IMAGE_INPUTS) -t $(IMAGE) . || { \
	  echo >&2; \
	  echo "make: the agent image $(IMAGE) could not be built (it needs Docker Hub and npm)." >&2; \
	  echo "make: without them, run bridged on the test image, whose claude is a scripted fake:" >&2; \
	  $(FALLBACK); \
	  exit 1; }

# IMAGE_STATE is "current" when $(IMAGE) needs no build: a `make image`
# built from these sources, or another image named with IMAGE= (the test
# image) that is there; else "missing", or "stale" for an image `make
# image` built (labelled bridged.inputs) from other inputs, or the default
# image built before images were labelled.
IMAGE_STATE = have=$$($(ENGINE_CLI) image inspect -f '{{index .Config.Labels "bridged.inputs"}}' $(IMAGE) 2>/dev/null) || { echo missing; exit 0; }; \
	if [ "$$have" = "$(IMAGE_INPUTS)" ]; then echo current; \
	elif [ -z "$$have" -o "$$have" = "<no value>" ] && [ "$(IMAGE)" != bridged-agent:latest ]; then echo current; \
	else echo stale; fi

# agent-image builds $(IMAGE) unless it is current: the test image with
# test-image, any other with the Dockerfile.
TEST_IMAGE := bridged-agent:test
agent-image:
	@case "$$($(IMAGE_STATE))" in \
	  current) ;; \
	  missing) if [ "$(IMAGE)" = $(TEST_IMAGE) ]; then echo "make: the test image $(IMAGE) is missing: building it"; $(MAKE) --no-print-directory test-image; exit; fi; \
	    echo "make: the agent image $(IMAGE) is missing: building it"; $(MAKE) --no-print-directory image;; \
	  *) echo "make: the agent image $(IMAGE) was built from other sources: rebuilding it"; $(MAKE) --no-print-directory image;; \
	esac

# image-reachable checks, before `make run` compiles anything, that an image
# it must build from the Dockerfile can be: Docker Hub and npm answer (any HTTP answer will do;
# curl, when there is one, asks with the environment's proxy settings).
# Neither answering, it stops at once with the fallback.
REGISTRY_URL ?= https://registry-1.docker.io/v2/
NPM_URL      ?= https://registry.npmjs.org/-/ping
image-reachable:
	@state=$$($(IMAGE_STATE)); [ "$$state" = current -o "$(IMAGE)" = $(TEST_IMAGE) ] && exit 0; \
	command -v curl >/dev/null || exit 0; \
	for url in $(REGISTRY_URL) $(NPM_URL); do \
	  if ! curl -s -o /dev/null --max-time 10 "$$url"; then \
	    echo "make: the agent image $(IMAGE) is $$state and must be built, but $$url does not answer:" >&2; \
	    echo "make: building it needs Docker Hub and npm. Without them, run bridged on the test image, whose claude is a scripted fake" >&2; \
	    echo "make: (docs/testing.md lists what it answers):" >&2; \
	    $(FALLBACK); \
	    exit 1; \
	  fi; \
	done

run: image-reachable build agent-image ## build, then run the daemon (state in ~/.local/share/bridged, or HOME_DIR=…); `bin/bridged chat` talks to it
	bin/bridged run $(if $(HOME_DIR),--home $(HOME_DIR)) --image $(IMAGE)

install: build ## install the binaries to /usr/local/bin and the README to /usr/local/share/doc/bridged
	install -m 0755 bin/bridged bin/agent-runner /usr/local/bin/
	install -D -m 0644 README.md /usr/local/share/doc/bridged/README.md

clean: ## remove build output
	rm -rf bin

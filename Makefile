# commprof build, test and benchmark targets. `make demo` and `make test`
# install what they need on Debian (Go modules; Open MPI for the launcher
# tests) and work from a clean clone.

GO      ?= go
BIN     := bin/commprof
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := openmpi-bin libopenmpi-dev libzstd-dev iproute2 dataset-fashion-mnist chromium mpich libmpich-dev python3-mpi4py python3-numpy hpcc python3-torch

.PHONY: all build demo test deps go-deps system-deps web-deps echarts pmpi pmpi-libs bench bench-go bench-mpi bench-pmpi vet fmt clean

all: build

build: go-deps pmpi
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/commprof

# The PMPI library that records unmodified MPI programs (interpose/pmpi/c),
# built for each MPI present with that MPI's own compiler wrapper, beside
# the commprof binary where `commprof record -- mpirun ...` finds it. The
# wrappers are looked up after system-deps has installed them, in a second
# make.
PMPI_SRC    := $(wildcard interpose/pmpi/c/*.c) $(wildcard interpose/pmpi/c/*.h)
PMPI_CFLAGS := -O2 -g -fPIC -shared -fvisibility=hidden -Wall -Wextra -DCP_VERSION='"$(VERSION)"'
MPICC_OPENMPI := $(shell command -v mpicc.openmpi 2>/dev/null || { mpicc -showme:version 2>/dev/null | grep -q 'Open MPI' && command -v mpicc; })
MPICC_MPICH   := $(shell command -v mpicc.mpich 2>/dev/null)
PMPI_LIBS := $(if $(MPICC_OPENMPI),bin/libcommprof-pmpi-openmpi.so) $(if $(MPICC_MPICH),bin/libcommprof-pmpi-mpich.so)

pmpi: system-deps
	@$(MAKE) --no-print-directory pmpi-libs

pmpi-libs: $(PMPI_LIBS)

bin/libcommprof-pmpi-openmpi.so: $(PMPI_SRC)
	@mkdir -p bin
	$(MPICC_OPENMPI) $(PMPI_CFLAGS) -o $@ interpose/pmpi/c/*.c -lzstd -lpthread -ldl

bin/libcommprof-pmpi-mpich.so: $(PMPI_SRC)
	@mkdir -p bin
	$(MPICC_MPICH) $(PMPI_CFLAGS) -o $@ interpose/pmpi/c/*.c -lzstd -lpthread -ldl

# The main job: the reference trainer on 4 local ranks over loopback TCP,
# on its embedded data set, recorded into runs/demo, and its HTML report.
demo: build
	rm -rf runs/demo
	$(BIN) record --ranks 4 --out runs/demo -- train
	$(BIN) report runs/demo

deps: go-deps system-deps web-deps

go-deps:
	$(GO) mod download

# npm packages pinned by package-lock.json, into node_modules/: Arrow JS and
# its codecs (the tests read traces with them as an independent Arrow
# implementation, tools/read-trace.mjs), ECharts, playwright-core (drives
# Chromium in the page tests, tools/check-page.mjs) and DuckDB (queries the
# Parquet export, tools/parquet-figures.mjs).
web-deps: system-deps
	npm ci --no-audit --no-fund --loglevel=error

# ECharts as reports embed it: the pinned npm package's bundle and licenses,
# committed in report/assets/echarts so that `go install` needs no npm. Run
# it after changing ECharts' version in package.json, and commit the result;
# `go test ./report` fails while the committed copy differs from
# node_modules'.
ECHARTS := node_modules/echarts
echarts: web-deps
	cp $(ECHARTS)/dist/echarts.min.js $(ECHARTS)/LICENSE $(ECHARTS)/NOTICE $(ECHARTS)/licenses/LICENSE-d3 report/assets/echarts/
	cp node_modules/zrender/LICENSE report/assets/echarts/LICENSE-zrender

# Debian packages the tests use; installed only when missing.
system-deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v npm >/dev/null || { echo "installing Debian packages: nodejs npm"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nodejs npm; }

# staticcheck, pinned, from the Go module proxy (run with `go run`, so
# nothing is installed outside the module cache).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every test, with the race detector; the launcher tests run real mpirun.
# The truth tests (cmd/commprof/truth_test.go, netns_test.go,
# interpose/pmpi/stall_test.go) check measured times against faults
# injected on purpose, so they run after the rest, alone on the machine
# (one package at a time) and without the detector's slowdown.
# Allocation counts are checked again without it (the detector allocates,
# so those tests skip themselves under -race).
test: deps vet build
	COMMPROF_REQUIRE_DEPS=1 $(GO) test -race -count=1 -timeout 20m -skip '^TestTruth' ./...
	COMMPROF_REQUIRE_DEPS=1 $(GO) test -p 1 -count=1 -timeout 10m -run '^TestTruth' ./cmd/commprof ./interpose/pmpi
	$(GO) test -count=1 -run 'Allocs' ./...

bench: bench-go
	$(BIN) bench allreduce --ranks 2
	$(BIN) bench allreduce --ranks 4

bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 20x ./...

# Open MPI's MPI_Allreduce over TCP, for comparison (bench/mpi).
bench-mpi: system-deps
	NP=2 bench/mpi/run-mpi.sh -f 2
	NP=4 bench/mpi/run-mpi.sh -f 2

# What the PMPI library costs a call, and 8-byte MPI_Allreduce with and
# without it (docs/benchmarks.md, "PMPI interposition").
bench-pmpi: pmpi
	interpose/pmpi/bench/run.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin bench/mpi/mpi_allreduce node_modules

# The README's two commands: `make run` and `make test`. Each installs missing Debian packages,
# configures and builds into build/, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test bench clean format

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash scripts/run-demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j2

bench: build
	@bash scripts/run-bench.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	@rm -rf $(BUILD)

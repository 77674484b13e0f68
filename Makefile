# The README's two commands: `make run` and `make test`. Each installs missing Debian packages,
# configures and builds into build/, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test sanitized bench clean format

# The pure layers' unit tests, built with AddressSanitizer and UBSan (any report fails `make test`).
SAN_BUILD ?= build-san
SAN_TESTS = tests/core/core_test tests/scheduler/scheduler_test

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
	@$(MAKE) --no-print-directory sanitized

sanitized: deps
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
	  -DINAC_SANITIZE=address,undefined -DINAC_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS) --target core_test scheduler_test
	@for t in $(SAN_TESTS); do \
	  echo "== $$t (AddressSanitizer + UBSan)"; \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	    $(SAN_BUILD)/$$t --gtest_brief=1 || exit 1; \
	done

bench: build
	@bash scripts/run-bench.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	@rm -rf $(BUILD) $(SAN_BUILD)

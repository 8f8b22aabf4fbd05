# Thin wrapper around CMake.  `make demo` and `make test` are the README's
# quick start: each installs what is missing, configures, builds, then runs.
BUILD ?= build
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=
JOBS ?= 2

.PHONY: all setup build demo test test-asan test-tsan clean format

all: build

setup:
	sh scripts/bootstrap.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/graphrun examples/fashion_mlp.graph --steps 2000 --eval accuracy

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, and
# under ThreadSanitizer (with the documented Hogwild! suppressions), each in
# its own build folder.
test-asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=Asan

test-tsan:
	$(MAKE) test BUILD=build-tsan BUILD_TYPE=Tsan

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cc')

clean:
	rm -rf $(BUILD)

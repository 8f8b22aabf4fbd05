# Thin wrapper around CMake.  `make demo` and `make test` are the README's
# quick start: each installs what is missing, configures, builds, then runs;
# `make demo` builds only the graphrun CLI it runs, `make test` everything.
# `make install` installs the build (PREFIX=DIR: there instead of CMake's
# default, /usr/local).
BUILD ?= build
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=
JOBS ?= 2

PREFIX ?=

.PHONY: all setup configure build demo test install test-asan test-tsan clean format

all: build

setup:
	sh scripts/bootstrap.sh

configure: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target graphrun
	./$(BUILD)/graphrun examples/fashion_mlp.graph --steps 2000 --eval accuracy

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

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

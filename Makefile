# Thin wrapper over meson. The two set-up commands of the README:
#   make run    installs build deps, builds, fetches the default model, starts the chat
#   make test   the same set-up, then the whole test suite and one summary line
# Also: make build, make test SANITIZE=address|thread, make debug, make fuzz, make soak,
# make deb, make clean.

SANITIZE ?=
MESON_OPTS ?=

ifeq ($(SANITIZE),address)
  BUILD ?= build-asan
  SETUP_OPTS = --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled
else ifeq ($(SANITIZE),thread)
  BUILD ?= build-tsan
  SETUP_OPTS = --buildtype=debug -Db_sanitize=thread -Db_lundef=false -Dcuda=disabled
else ifeq ($(SANITIZE),)
  BUILD ?= build
  SETUP_OPTS = --buildtype=release
else
  $(error SANITIZE must be address or thread)
endif
# CI compiles and links the CUDA path for one architecture (sm_90, the GPU
# check's); release builds keep the full list of meson_options.txt.
ifeq ($(CI),true)
  SETUP_OPTS += --werror
  CUDA_ARCH ?= sm_90
endif
ifneq ($(CUDA_ARCH),)
  SETUP_OPTS += -Dcuda-arch=$(CUDA_ARCH)
endif

TERN = $(BUILD)/app/tern
TEST_ARGS ?=

.PHONY: all deps build run test debug fuzz soak clean models reference deb

all: build

deps:
	@packaging/install-deps

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(SETUP_OPTS) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	meson compile -C $(BUILD)

models:
	@packaging/fetch-model
	@packaging/fetch-model --model gemma3-270m

run: build
	@packaging/fetch-model
	$(TERN) chat

# The reference engine (llama.cpp's llama-server and tools) for the tests that
# compare with it; built once per machine and cached (packaging/build-reference).
reference: deps
	@packaging/build-reference >/dev/null

test: build models reference
	@meson test -C $(BUILD) --print-errorlogs $(TEST_ARGS) > $(BUILD)/test-output.txt 2>&1; \
	  rc=$$?; tail -n 40 $(BUILD)/test-output.txt; \
	  python3 tests/summary.py $(BUILD); src=$$?; \
	  [ $$rc -eq 0 ] && [ $$src -eq 0 ]

debug:
	$(MAKE) build BUILD=build-debug SETUP_OPTS=--buildtype=debug

fuzz: deps
	CC=clang meson setup build-fuzz --buildtype=debug -Dfuzz=true -Dcuda=disabled \
	  -Db_sanitize=address,undefined -Db_lundef=false 2>/dev/null || true
	meson compile -C build-fuzz fuzz_gguf fuzz_tok fuzz_oai fuzz_remote
	@echo "run: mkdir -p build-fuzz/corpus && build-fuzz/tests/engine/model/fuzz_gguf -dict=tests/engine/model/gguf/gguf.dict -max_total_time=600 build-fuzz/corpus tests/engine/model/gguf/corpus"
	@echo "run: mkdir -p build-fuzz/oai-corpus && build-fuzz/tests/engine/wire/fuzz_oai -max_total_time=600 build-fuzz/oai-corpus tests/engine/wire/corpus"
	@echo "run: mkdir -p build-fuzz/tok-corpus && TERN_SHARED=../shared build-fuzz/tests/engine/model/fuzz_tok -max_total_time=600 build-fuzz/tok-corpus tests/engine/model/tok/corpus"
	@echo "run: mkdir -p build-fuzz/remote-corpus && build-fuzz/tests/engine/remote/fuzz_remote -max_total_time=600 build-fuzz/remote-corpus tests/engine/remote/corpus"

# tern serve under a long mixed load (outside CI: 10,000 requests, bounded by
# SOAK_MAX_S seconds; SOAK_REQUESTS, SOAK_CONC (48) and SOAK_THREADS (2) size it).
soak: build models
	TERN_BIN=$(TERN) TERN_SRC=$(CURDIR) PYTHONPATH=tests/e2e/serve python3 tests/e2e/serve/soak.py

# a Debian package (dpkg-deb) of a /usr build: build-deb/tern_VERSION_ARCH.deb
deb: deps
	@[ -f build-deb/build.ninja ] || meson setup build-deb --prefix=/usr --buildtype=release -Dcuda=disabled $(MESON_OPTS)
	meson compile -C build-deb
	packaging/make-deb build-deb build-deb

clean:
	rm -rf build build-asan build-tsan build-debug build-fuzz build-deb

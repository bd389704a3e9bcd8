# attnlab -- build, test, demo, bench.
# `make` builds build/attnlab. `make demo` first runs `make deps`, which
# installs the missing Debian packages the demo needs (as root) or prints
# the apt-get command to run; `make test` runs `make deps-test`, the same
# plus the optional cross-check packages (PyTorch, NumPy, Chromium), and
# `make bench` adds PyTorch, its reference (scripts/deps.sh says which).
#   ARCH=-march=x86-64-v2   portable build instead of -march=native
#   SAN=1                   AddressSanitizer + UBSan build (in build-san/)
#   COV=1                   gcov-instrumented build (in build-cov/); `make
#                           coverage` runs the tests on it and prints line
#                           and branch coverage of src/ per folder (gcovr)
# `make fuzz` builds the libFuzzer targets of tests/fuzz/ with clang and runs
# each for FUZZ_SECONDS (60); `make valgrind` runs the CLI end to end under
# valgrind memcheck; `make test-slurm` runs a sweep on a one-node Slurm
# started on this machine (as root).

CC      ?= cc
PKGS    := openblas lapacke libcjson libpng sqlite3 cairo libzip oniguruma libutf8proc
ARCH    ?= -march=native
BUILD   ?= build
OPT     ?= -O2
ifeq ($(SAN),1)
BUILD   := build-san
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
endif
ifeq ($(COV),1)
BUILD   := build-cov
# atomic counters: the engine's OpenMP threads run the same lines at once
OPT     := -O1 -g --coverage -fprofile-update=atomic -DAL_COVERAGE
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  += -std=c11 -Wall -Wextra -Werror $(OPT) $(ARCH) -fno-math-errno -fopenmp -Iinclude $(PKG_CFLAGS) -MMD -MP
LDLIBS  += $(PKG_LIBS) -ldnnl -lm
SAN_LD  := -fsanitize=address,undefined
LDFLAGS += -fopenmp $(if $(filter 1,$(SAN)),$(SAN_LD)) $(if $(filter 1,$(COV)),--coverage)

LIB_SRC  := $(filter-out src/cli/main.c,$(wildcard src/*/*.c))
LIB_OBJ  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
PIC_OBJ  := $(patsubst src/%.c,$(BUILD)/pic/%.o,$(LIB_SRC))
TEST_SRC := $(wildcard tests/*.c)
TEST_OBJ := $(patsubst tests/%.c,$(BUILD)/tobj/%.o,$(TEST_SRC))

.PHONY: all deps deps-test test demo quickstart bench clean fuzz valgrind layers test-slurm python coverage format format-check
all: $(BUILD)/attnlab $(BUILD)/libattnlab.so

deps:
	@sh scripts/deps.sh
deps-test:
	@sh scripts/deps.sh test

# The layer rule (docs/design.md): a file includes headers of its own
# folder or of folders below it, never above or beside it.
layers:
	@sh scripts/layers.sh

# The C sources' layout is .clang-format's, as clang-format 14 (Debian 12's,
# pinned: another version lays some lines out differently) writes it:
# `make format` rewrites the files, `make format-check` (CI) fails naming
# each line that differs.
CLANG_FORMAT ?= clang-format-14
FORMAT_FILES = $(shell git ls-files 'src/*.c' 'src/*.h' 'include/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c')
format:
	@$(CLANG_FORMAT) -i $(FORMAT_FILES)
format-check:
	@$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES) && echo "format: ok ($(words $(FORMAT_FILES)) files)"

$(BUILD)/obj/%.o: src/%.c | $(BUILD)/obj
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/tobj/%.o: tests/%.c $(BUILD)/tests_list.h | $(BUILD)/tobj
	$(CC) $(CFLAGS) -I$(BUILD) -Itests -c $< -o $@
$(BUILD)/obj $(BUILD)/tobj:
	@mkdir -p $@
# The shared library (python/attnlab loads it with ctypes) is the same
# sources compiled a second time as position-independent code, so the
# binary's own objects, and so its arithmetic, stay as they are; with
# hidden visibility, so that it exports api.h's AL_API functions alone.
$(BUILD)/pic/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@
$(BUILD)/pic/report/viewer.o: CFLAGS += -I$(BUILD)/gen
$(BUILD)/pic/report/viewer.o: $(BUILD)/gen/viewer_js.h
$(BUILD)/libattnlab.so: $(PIC_OBJ) src/cli/api.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=src/cli/api.map $(PIC_OBJ) $(LDLIBS) -o $@

# The explorers' script of report --interactive is src/report/viewer.js,
# compiled in as a C string (one line of JavaScript per line of C).
$(BUILD)/gen/viewer_js.h: src/report/viewer.js
	@mkdir -p $(@D)
	@{ echo '/* generated from src/report/viewer.js by the Makefile */'; \
	  echo 'static const char viewer_js[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; \
	  echo ';'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/report/viewer.o: CFLAGS += -I$(BUILD)/gen
$(BUILD)/obj/report/viewer.o: $(BUILD)/gen/viewer_js.h

$(BUILD)/libattnlab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/attnlab: $(BUILD)/obj/cli/main.o $(BUILD)/libattnlab.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The test list is generated from the TEST(name) lines of tests/test_*.c,
# so adding a test is adding a function, nothing else.
$(BUILD)/tests_list.h: $(wildcard tests/test_*.c) | $(BUILD)/obj
	@grep -h '^TEST(' tests/test_*.c | sed 's/^TEST(\([A-Za-z0-9_]*\)).*/X(\1)/' > $@.tmp && mv $@.tmp $@
# `make test` replays every fuzz target's seed corpus (tests/test_fuzz_replay.c):
# each tests/fuzz/fuzz_<t>.c is compiled once more with its entry points
# renamed fuzz_replay_<t> and fuzz_init_<t>, and linked into the runner.
FUZZ_REPLAY_OBJ := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/tobj/fuzz/%.o,$(wildcard tests/fuzz/fuzz_*.c))
$(BUILD)/tobj/fuzz/%.o: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h | $(BUILD)/tobj
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DLLVMFuzzerTestOneInput=fuzz_replay_$* -DLLVMFuzzerInitialize=fuzz_init_$* \
	  -c $< -o $@
$(BUILD)/test_runner: $(TEST_OBJ) $(FUZZ_REPLAY_OBJ) $(BUILD)/libattnlab.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The engine benchmark links the library directly (bench/bench.sh runs it).
$(BUILD)/bench_engine: bench/bench_engine.c $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libattnlab.a $(LDLIBS) -o $@

# Under SAN=1 any sanitizer report fails the test that triggered it (the
# CLI exits non-zero; the runner checks each test process for leaks).
# tests/lsan.supp only silences the OpenMP/OpenBLAS runtimes' own thread
# pools and fontconfig's leaks under cairo's text, never attnlab code.
SAN_ENV := ASAN_OPTIONS=detect_leaks=1 \
           LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test: deps-test
	@$(MAKE) --no-print-directory $(BUILD)/attnlab $(BUILD)/test_runner $(if $(filter 1,$(SAN)),,$(BUILD)/libattnlab.so)
	@$(if $(filter 1,$(SAN)),$(SAN_ENV)) ATTNLAB_BIN=$(BUILD)/attnlab $(BUILD)/test_runner $(T)

# demo and quickstart build the Python package's library too, so that
# attnlab.Model(...) works on their models from the checkout afterwards
demo: deps
	@$(MAKE) --no-print-directory $(BUILD)/attnlab $(BUILD)/libattnlab.so
	@sh scripts/demo.sh

# the README's quick start (scripts/quickstart.sh): its clock starts after the build
quickstart: deps
	@$(MAKE) --no-print-directory $(BUILD)/attnlab $(BUILD)/libattnlab.so
	@ATTNLAB_BIN=$(BUILD)/attnlab sh scripts/quickstart.sh

# The Python package (docs/python.md) installed into $(VENV): Debian's
# python3 refuses pip installs into the system Python and there is no
# network for pip's build isolation, so a venv that sees the system's
# NumPy (--system-site-packages) and a build without isolation; the
# package's build step runs `make build/libattnlab.so` here and ships
# the library inside the package.
VENV ?= .venv
python:
	@sh scripts/deps.sh python
	@$(MAKE) --no-print-directory $(BUILD)/libattnlab.so
	@test -x $(VENV)/bin/pip || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	@$(VENV)/bin/pip install --quiet --no-build-isolation ./python
	@cd / && $(abspath $(VENV))/bin/python -c "import attnlab; print('attnlab', attnlab.__version__, \
	    'installed in $(VENV):', attnlab._find_library())"

bench:
	@sh scripts/deps.sh bench
	@$(MAKE) --no-print-directory $(BUILD)/attnlab $(BUILD)/bench_engine
	@BUILD=$(BUILD) sh bench/bench.sh

# ---- fuzzing: clang + libFuzzer (`sh scripts/deps.sh fuzz` installs them).
# The library is rebuilt with coverage and ASan+UBSan in build-fuzz/; each
# tests/fuzz/fuzz_<t>.c becomes build-fuzz/fuzz_<t>, run on the seed corpus
# tests/fuzz/<t>/ for FUZZ_SECONDS by tests/fuzz/run.sh.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
                -fno-sanitize-recover=undefined -Wno-pass-failed
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(BUILD)/libattnlab.a $(LDLIBS) -o $@
fuzz:
	@sh scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=$(FUZZ_CC) SAN= OPT="$(FUZZ_OPT)" \
	    $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)
	@sh tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---- scripts/slurm/sweep.sh on a real one-node Slurm started on this
# machine (tests/slurm/run.sh; root; `sh scripts/deps.sh slurm` installs
# slurm-wlm and munge). Without them it prints "SKIP slurm: why".
test-slurm:
	@sh scripts/deps.sh slurm
	@$(MAKE) --no-print-directory $(BUILD)/attnlab
	@ATTNLAB_BIN=$(BUILD)/attnlab sh tests/slurm/run.sh

# ---- valgrind memcheck over the CLI end to end (tests/valgrind.sh).
# The counts start from zero (old .gcda files removed), the whole suite
# runs (its result is the target's), then gcovr reads the counts: every
# file of src/, one line per folder and the total (scripts/coverage.py).
coverage: deps-test
	@sh scripts/deps.sh coverage
	@$(MAKE) --no-print-directory COV=1 build-cov/attnlab build-cov/test_runner build-cov/libattnlab.so
	@find build-cov -name '*.gcda' -delete
	@s=0; ATTNLAB_BIN=build-cov/attnlab build-cov/test_runner $(T) || s=$$?; \
	 gcovr --root . --filter 'src/' -j 2 --json-summary build-cov/coverage.json build-cov >/dev/null && \
	 python3 scripts/coverage.py build-cov/coverage.json && exit $$s

valgrind: deps
	@sh scripts/deps.sh valgrind
	@$(MAKE) --no-print-directory BUILD=build-vg OPT="-O1 -g" ARCH=-march=x86-64-v2 build-vg/attnlab
	@sh tests/valgrind.sh build-vg/attnlab

clean:
	rm -rf build build-san build-fuzz build-vg build-cov

-include $(LIB_OBJ:.o=.d) $(PIC_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/obj/cli/main.d $(BUILD)/bench_engine.d

# attnlab -- build, test, demo, bench.
# `make` builds build/attnlab; `make test`, `make demo`, `make bench` first
# run `make deps`, which installs missing Debian packages (as root) or
# prints the apt-get command to run.
#   ARCH=-march=x86-64-v2   portable build instead of -march=native
#   SAN=1                   AddressSanitizer + UBSan build (in build-san/)

CC      ?= cc
PKGS    := openblas lapacke libcjson libpng sqlite3
ARCH    ?= -march=native
BUILD   ?= build
OPT     ?= -O2
ifeq ($(SAN),1)
BUILD   := build-san
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  += -std=c11 -Wall -Wextra -Werror $(OPT) $(ARCH) -fopenmp -Iinclude $(PKG_CFLAGS) -MMD -MP
LDLIBS  += $(PKG_LIBS) -lm
SAN_LD  := -fsanitize=address,undefined
LDFLAGS += -fopenmp $(if $(filter 1,$(SAN)),$(SAN_LD))

LIB_SRC  := $(filter-out src/main.c,$(wildcard src/*.c))
LIB_OBJ  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
TEST_SRC := $(wildcard tests/*.c)
TEST_OBJ := $(patsubst tests/%.c,$(BUILD)/tobj/%.o,$(TEST_SRC))

.PHONY: all deps test demo bench clean
all: $(BUILD)/attnlab

deps:
	@sh scripts/deps.sh

$(BUILD)/obj/%.o: src/%.c | $(BUILD)/obj
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/tobj/%.o: tests/%.c $(BUILD)/tests_list.h | $(BUILD)/tobj
	$(CC) $(CFLAGS) -I$(BUILD) -Itests -c $< -o $@
$(BUILD)/obj $(BUILD)/tobj:
	@mkdir -p $@

$(BUILD)/libattnlab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/attnlab: $(BUILD)/obj/main.o $(BUILD)/libattnlab.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The test list is generated from the TEST(name) lines of tests/test_*.c,
# so adding a test is adding a function, nothing else.
$(BUILD)/tests_list.h: $(wildcard tests/test_*.c) | $(BUILD)/obj
	@grep -h '^TEST(' tests/test_*.c | sed 's/^TEST(\([A-Za-z0-9_]*\)).*/X(\1)/' > $@.tmp && mv $@.tmp $@
$(BUILD)/test_runner: $(TEST_OBJ) $(BUILD)/libattnlab.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The engine benchmark links the library directly (bench/bench.sh runs it).
$(BUILD)/bench_engine: bench/bench_engine.c $(BUILD)/libattnlab.a
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

test: deps
	@$(MAKE) --no-print-directory $(BUILD)/attnlab $(BUILD)/test_runner
	@ATTNLAB_BIN=$(BUILD)/attnlab $(BUILD)/test_runner $(T)

demo: deps
	@$(MAKE) --no-print-directory $(BUILD)/attnlab
	@sh scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory $(BUILD)/attnlab $(BUILD)/bench_engine
	@BUILD=$(BUILD) sh bench/bench.sh

clean:
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/obj/main.d $(BUILD)/bench_engine.d

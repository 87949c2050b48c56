# Makefile: builds the SQLite loadable extension $(BUILD)/rocketmq.so, the
# engine library $(BUILD)/libengine.a and the C tests, and runs the suite.
#
#   make              build everything under build/
#   make test         install missing Debian packages (as root), build, run every test
#   make test T=re    run only the tests whose name matches the regex re
#   make asan         the suite built with ASan+UBSan in build-asan/
#   make tsan         the suite built with TSan in build-tsan/
#   make bench        build and run test/bench/*
#   make demo         the README's first command
#   make clean

BUILD ?= build
OPT ?= -O2
EXTRA_CFLAGS ?=
EXTRA_LDFLAGS ?=
T ?=

CPPFLAGS = -Iengine -MMD -MP
CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Werror -fPIC \
         -fvisibility=hidden -pthread $(EXTRA_CFLAGS)
LDFLAGS = -pthread $(EXTRA_LDFLAGS)
# zlib is the tests' reference CRC; the engine and the extension do not use it.
TEST_LDLIBS = -lz
AR ?= ar

ENGINE_SRC := $(sort $(wildcard engine/*.c))
EXT_SRC := $(sort $(wildcard ext/*.c))
TEST_SRC := $(sort $(wildcard test/engine/test_*.c))
HELPER_SRC := $(filter-out $(TEST_SRC),$(sort $(wildcard test/engine/*.c)))
BENCH_SRC := $(sort $(wildcard test/bench/*.c))

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/obj/%.o)
EXT_OBJ := $(EXT_SRC:%.c=$(BUILD)/obj/%.o)
TESTPROG_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o) $(HELPER_SRC:%.c=$(BUILD)/obj/%.o) \
                $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)

EXTENSION := $(BUILD)/rocketmq.so
LIBENGINE := $(BUILD)/libengine.a
TESTS := $(TEST_SRC:test/engine/%.c=$(BUILD)/test/%)
HELPERS := $(HELPER_SRC:test/engine/%.c=$(BUILD)/test/%)
BENCHES := $(BENCH_SRC:test/bench/%.c=$(BUILD)/bench/%)

ASAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
TSAN_FLAGS = -fsanitize=thread

.PHONY: all test check asan tsan bench demo fuzz clean
.DELETE_ON_ERROR:
# Keep the objects of the test programs, which only pattern rules name.
.SECONDARY: $(TESTPROG_OBJ)

all: $(EXTENSION) $(LIBENGINE) $(TESTS) $(HELPERS) $(BENCHES)

# Objects depend on the Makefile so that a change of flags rebuilds them.
$(BUILD)/obj/%.o: %.c Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/test/%.o: CPPFLAGS += -Itest/engine

$(LIBENGINE): $(ENGINE_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# The extension carries no SQLite: ext/ reaches it through sqlite3ext.h's
# API table. -z nodelete keeps the code mapped while engine threads run.
$(EXTENSION): $(EXT_OBJ) $(LIBENGINE)
	$(CC) -shared -Wl,--no-undefined -Wl,-z,nodelete $(LDFLAGS) -o $@ $(EXT_OBJ) $(LIBENGINE)

$(BUILD)/test/%: $(BUILD)/obj/test/engine/%.o $(LIBENGINE)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBENGINE) $(TEST_LDLIBS)

# Bench programs may also drive the extension through SQLite (bench_sql.c).
$(BUILD)/bench/%: $(BUILD)/obj/test/bench/%.o $(LIBENGINE)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBENGINE) -lsqlite3

test:
	test/deps.sh
	$(MAKE) --no-print-directory check

check: all
	test/run.sh $(BUILD) '$(T)'

# Interpreters (tclsh, python3) are not instrumented: the sanitizer runtime is
# preloaded into them through RMQ_PRELOAD, and their own leaks are not ours
# (run.sh turns detect_leaks off for them).
asan:
	test/deps.sh
	RMQ_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 EXTRA_CFLAGS="$(ASAN_FLAGS)" EXTRA_LDFLAGS="$(ASAN_FLAGS)" check

tsan:
	test/deps.sh
	RMQ_PRELOAD="$$($(CC) -print-file-name=libtsan.so)" \
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	$(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 EXTRA_CFLAGS="$(TSAN_FLAGS)" EXTRA_LDFLAGS="$(TSAN_FLAGS)" check

bench: all
	@if [ -z "$(BENCHES)" ]; then echo "no benchmarks yet"; fi
	@set -e; for b in $(BENCHES); do echo "== $$b"; RMQ_EXT=$(BUILD)/rocketmq $$b; done

# The README's first command: a fresh store under build/demo-store, the
# examples of sql/ run in the sqlite3 shell, their output printed.
DEMO_SQL = quickstart consume outbox joins admin
demo: all
	@rm -rf build/demo-store
	@for f in $(DEMO_SQL); do \
	  echo; echo "== sql/$$f.sql"; \
	  sqlite3 -bail :memory: < sql/$$f.sql || exit 1; \
	done

# libFuzzer targets for the code that reads bytes from disk (clang; not part
# of `make test`): FUZZ_SECONDS of fuzzing each, starting from the golden stores.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS = -fsanitize=fuzzer,address,undefined -g -O1 -std=c11 -D_GNU_SOURCE -Iengine
fuzz:
	@mkdir -p build-fuzz/corpus
	clang $(FUZZ_FLAGS) test/fuzz/fuzz_decode.c engine/message.c engine/crc32.c \
	  engine/properties.c engine/java_hash.c -o build-fuzz/fuzz_decode
	cp -f test/golden/store-*/commitlog/* build-fuzz/corpus/ 2>/dev/null || true
	build-fuzz/fuzz_decode -max_total_time=$(FUZZ_SECONDS) -max_len=70000 build-fuzz/corpus

clean:
	rm -rf -- build build-asan build-tsan build-fuzz $(BUILD)

-include $(ENGINE_OBJ:.o=.d) $(EXT_OBJ:.o=.d) $(TESTPROG_OBJ:.o=.d)

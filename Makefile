# Makefile: builds the SQLite loadable extension $(BUILD)/rocketmq.so and the
# engine library $(BUILD)/libengine.a; builds and runs the tests.
#
#   make                  the extension and the engine library, under build/
#   make check            build the tests, helpers and benches, run every test
#   make check T=re       run only the tests whose name matches the regex re
#   make test             install missing Debian packages (as root), then check
#   make asan             the suite built with ASan+UBSan in build-asan/
#   make tsan             the suite built with TSan in build-tsan/
#   make torture          the crash loops, long: SIGKILL during large COMMITs
#                         (TORTURE_TXN_KILLS), of sync producers
#                         (TORTURE_SYNC_KILLS), and the two-engine cases
#                         (TORTURE_ENGINE_ROUNDS), during delayed delivery
#                         (TORTURE_SCHEDULE_KILLS), of a process committing
#                         consumer offsets (TORTURE_CONSUMER_KILLS), of an HA
#                         sync master and its slave (TORTURE_HA_KILLS), of
#                         writer processes of one store, the owner among
#                         them (TORTURE_MP_KILLS), and random byte flips judged by rocketmq_verify
#                         (TORTURE_SWEEP_FLIPS, at most TORTURE_SWEEP_SECONDS);
#                         `make check` runs a few of each
#   make bench            build and run test/bench/*: the goals' table first
#   make bench QUICK=1    only that table, with fewer messages (under a minute)
#   make demo             the README's first command
#   make fresh-check      make demo and make test on a fresh minimal Debian 12
#                         (test/fresh_check.sh: root, debootstrap, Debian's mirror)
#   make install          the extension, the Tcl package rocketmq, the engine
#                         library and its headers under $(DESTDIR)$(PREFIX)
#                         (see below); make uninstall
#   make fuzz             build the libFuzzer targets and run each FUZZ_SECONDS
#   make fuzz-build       only build them
#   make format           clang-format the C sources in place
#   make format-check     fail, naming the files, when clang-format would change one
#   make clean
#
# The flags the code needs are in RMQ_CFLAGS; the usual CPPFLAGS, CFLAGS,
# LDFLAGS and LDLIBS come after them (CFLAGS defaults to -O2 -g), then OPT
# (e.g. OPT=-O0), which overrides CFLAGS' optimization level. -Werror is off
# unless WERROR=-Werror is given (CI, asan and tsan give it). Objects are
# rebuilt when any of these change.

BUILD ?= build
CFLAGS ?= -O2 -g
OPT ?=
QUICK ?=
WERROR ?=
T ?=
AR ?= ar
INSTALL ?= install
CLANG_FORMAT ?= clang-format
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

RMQ_CPPFLAGS = -Iengine -MMD -MP
RMQ_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -fPIC -fvisibility=hidden -pthread
# Sanitizer flags, for compiling and linking: set by the asan and tsan targets.
SAN_FLAGS =
COMPILE = $(CC) $(RMQ_CPPFLAGS) $(CPPFLAGS) $(RMQ_CFLAGS) $(WERROR) $(CFLAGS) $(OPT) $(SAN_FLAGS)
LINK = $(CC) -pthread $(CFLAGS) $(OPT) $(SAN_FLAGS) $(LDFLAGS)
# The body codecs (engine/compression.c): zlib, LZ4 frames, zstd frames.
ENGINE_LDLIBS = -lz -llz4 -lzstd

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

.PHONY: all deps check test asan tsan torture bench demo fresh-check install uninstall fuzz \
        fuzz-build format format-check clean FORCE
.DELETE_ON_ERROR:
# Keep the objects of the test programs, which only pattern rules name.
.SECONDARY: $(TESTPROG_OBJ)

all: $(EXTENSION) $(LIBENGINE)

# The Debian packages a target needs, installed (as root) or named in the one
# command to run, before anything is compiled (test/deps.sh). demo and test
# ask for more; target-specific, DEPS_LEVEL reaches their prerequisites.
DEPS_LEVEL = build
demo: DEPS_LEVEL = demo
test: DEPS_LEVEL = test
deps:
	@test/deps.sh $(DEPS_LEVEL)

# The compile and link commands as last used: objects depend on this file,
# which is rewritten only when a flag changes (make OPT=-O0 after make).
FLAGS_FILE := $(BUILD)/flags
$(FLAGS_FILE): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(subst ','\'',$(COMPILE) | $(LINK) $(LDLIBS))' > $@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi

$(BUILD)/obj/%.o: %.c $(FLAGS_FILE) | deps
	@mkdir -p $(@D)
	$(COMPILE) -c $< -o $@

$(BUILD)/obj/test/%.o: test/%.c $(FLAGS_FILE) | deps
	@mkdir -p $(@D)
	$(COMPILE) -Itest/engine -c $< -o $@

$(LIBENGINE): $(ENGINE_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# The extension carries no SQLite: ext/ reaches it through sqlite3ext.h's
# API table. -z nodelete keeps the code mapped while engine threads run.
$(EXTENSION): $(EXT_OBJ) $(LIBENGINE) $(FLAGS_FILE)
	$(LINK) -shared -Wl,--no-undefined -Wl,-z,nodelete -o $@ $(EXT_OBJ) $(LIBENGINE) $(ENGINE_LDLIBS) \
	  $(LDLIBS) -lm

$(BUILD)/test/%: $(BUILD)/obj/test/engine/%.o $(LIBENGINE)
	@mkdir -p $(@D)
	$(LINK) -o $@ $< $(LIBENGINE) $(ENGINE_LDLIBS) $(LDLIBS)

# Bench programs may also drive the extension through SQLite (bench_sql.c).
$(BUILD)/bench/%: $(BUILD)/obj/test/bench/%.o $(LIBENGINE)
	@mkdir -p $(@D)
	$(LINK) -o $@ $< $(LIBENGINE) $(ENGINE_LDLIBS) $(LDLIBS) -lsqlite3

check: all $(TESTS) $(HELPERS) $(BENCHES)
	test/run.sh $(BUILD) '$(T)'

TORTURE_TXN_KILLS ?= 40
TORTURE_SYNC_KILLS ?= 50
TORTURE_ENGINE_ROUNDS ?= 200
TORTURE_SCHEDULE_KILLS ?= 20
TORTURE_CONSUMER_KILLS ?= 50
TORTURE_HA_KILLS ?= 50
TORTURE_MP_KILLS ?= 200
TORTURE_SWEEP_FLIPS ?= 3000
TORTURE_SWEEP_SECONDS ?= 600
torture: all $(TESTS)
	RMQ_TORTURE_KILLS=$(TORTURE_TXN_KILLS) test/run.sh $(BUILD) '^test_txn_crash$$'
	RMQ_TORTURE_KILLS=$(TORTURE_SYNC_KILLS) test/run.sh $(BUILD) '^test_sync_torture$$'
	RMQ_TORTURE_ENGINES=$(TORTURE_ENGINE_ROUNDS) test/run.sh $(BUILD) '^store_engines\.py$$'
	RMQ_SCHEDULE_CRASH_CYCLES=$(TORTURE_SCHEDULE_KILLS) test/run.sh $(BUILD) '^schedule_crash\.test$$'
	RMQ_CONSUMER_CRASH_CYCLES=$(TORTURE_CONSUMER_KILLS) test/run.sh $(BUILD) '^consumer_crash\.test$$'
	RMQ_HA_KILLS=$(TORTURE_HA_KILLS) test/run.sh $(BUILD) '^test_ha_process$$'
	RMQ_MP_KILLS=$(TORTURE_MP_KILLS) test/run.sh $(BUILD) '^multi_process_crash\.py$$'
	RMQ_SWEEP_FLIPS=$(TORTURE_SWEEP_FLIPS) RMQ_SWEEP_SECONDS=$(TORTURE_SWEEP_SECONDS) \
	  test/run.sh $(BUILD) '^corrupt_sweep\.py$$'

test: deps
	$(MAKE) --no-print-directory check

# Interpreters (tclsh, python3) are not instrumented: the sanitizer runtime is
# preloaded into them through RMQ_PRELOAD, and their own leaks are not ours
# (run.sh turns detect_leaks off for them).
asan:
	test/deps.sh
	RMQ_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 WERROR=-Werror \
	  SAN_FLAGS="$(ASAN_FLAGS)" check

tsan:
	test/deps.sh
	RMQ_PRELOAD="$$($(CC) -print-file-name=libtsan.so)" \
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	$(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 WERROR=-Werror \
	  SAN_FLAGS="$(TSAN_FLAGS)" check

# The goals' table first (build/bench/results.json, throughput.png; gnuplot-nox
# installed when missing, as root), then, unless QUICK=1, the other benches.
bench: all $(BENCHES)
	@test/bench/deps.sh
	RMQ_EXT=$(BUILD)/rocketmq RMQ_BENCH_OUT=$(BUILD)/bench RMQ_BENCH_QUICK=$(QUICK) \
	  $(BUILD)/bench/bench_goals
	@if command -v gnuplot >/dev/null 2>&1; then \
	  gnuplot -e "dat='$(BUILD)/bench/throughput.dat'; png='$(BUILD)/bench/throughput.png'" \
	    test/bench/throughput.gp && echo "chart: $(BUILD)/bench/throughput.png"; fi
	@set -e; if [ -z "$(QUICK)" ]; then \
	  for b in $(filter-out %/bench_goals,$(BENCHES)); do \
	    echo "== $$b"; RMQ_EXT=$(BUILD)/rocketmq $$b; done; fi

# The README's first command: a fresh store under build/demo-store, the
# examples of sql/ run in the sqlite3 shell, their output printed.
DEMO_SQL = quickstart consume consumer_group outbox joins admin broker_store mqadmin delayed retention
demo: deps all
	@rm -rf build/demo-store build/delayed-store build/retention-store
	@for f in $(DEMO_SQL); do \
	  echo; echo "== sql/$$f.sql"; \
	  sqlite3 -bail :memory: < sql/$$f.sql || exit 1; \
	done

fresh-check:
	test/fresh_check.sh

# Installed: the extension as $(LIBDIR)/sqlite3/rocketmq.so (where Debian's
# SQLite extensions go: `.load /usr/lib/sqlite3/rocketmq`) and, as a symlink to
# it, $(LIBDIR)/rocketmq.so: dlopen() finds a bare name in /usr/lib, so with
# PREFIX=/usr `.load rocketmq` works (not with /usr/local: ld.so.cache holds
# only lib*.so names, so there it is `.load /usr/local/lib/rocketmq`). The Tcl
# package rocketmq in $(LIBDIR)/tcltk/rocketmq (on tclsh's auto_path for /usr
# and /usr/local), which finds the extension relative to itself; the engine
# as $(LIBDIR)/librocketmq-engine.a, and engine/rmq.h with the engine headers
# it includes under $(INCLUDEDIR)/rocketmq/ (#include <rocketmq/rmq.h>), with
# $(LIBDIR)/pkgconfig/rocketmq-engine.pc, which names the libraries it needs.
VERSION := $(shell sed -n 's/^\#define RMQ_VERSION "\(.*\)"$$/\1/p' engine/rmq.h)
TCLPKGDIR = $(LIBDIR)/tcltk/rocketmq
# The .pc file's directories relative to ${prefix} where they lie under it
# (so that pkg-config --define-prefix finds a DESTDIR's files).
PC_LIBDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
PC_INCLUDEDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))
INSTALL_HEADERS = $(sort $(filter engine/%.h,$(shell $(CC) -MM -Iengine engine/rmq.h)))
install: all
	$(INSTALL) -d $(DESTDIR)$(LIBDIR)/sqlite3 $(DESTDIR)$(INCLUDEDIR)/rocketmq \
	  $(DESTDIR)$(TCLPKGDIR)
	$(INSTALL) -m 755 $(EXTENSION) $(DESTDIR)$(LIBDIR)/sqlite3/rocketmq.so
	ln -sf sqlite3/rocketmq.so $(DESTDIR)$(LIBDIR)/rocketmq.so
	$(INSTALL) -m 644 tcl/rocketmq.tcl $(DESTDIR)$(TCLPKGDIR)/rocketmq.tcl
	sed 's/@VERSION@/$(VERSION)/g' tcl/pkgIndex.tcl.in > $(DESTDIR)$(TCLPKGDIR)/pkgIndex.tcl
	chmod 644 $(DESTDIR)$(TCLPKGDIR)/pkgIndex.tcl
	$(INSTALL) -m 644 $(LIBENGINE) $(DESTDIR)$(LIBDIR)/librocketmq-engine.a
	$(INSTALL) -m 644 $(INSTALL_HEADERS) $(DESTDIR)$(INCLUDEDIR)/rocketmq/
	$(INSTALL) -d $(DESTDIR)$(LIBDIR)/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(PC_LIBDIR)|; s|@INCLUDEDIR@|$(PC_INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|; s|@LIBS@|$(ENGINE_LDLIBS) -pthread|' \
	  engine/rocketmq-engine.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/rocketmq-engine.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/sqlite3/rocketmq.so $(DESTDIR)$(LIBDIR)/rocketmq.so \
	  $(DESTDIR)$(LIBDIR)/librocketmq-engine.a $(DESTDIR)$(LIBDIR)/pkgconfig/rocketmq-engine.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/rocketmq $(DESTDIR)$(TCLPKGDIR)
	rmdir $(DESTDIR)$(LIBDIR)/sqlite3 $(DESTDIR)$(LIBDIR)/tcltk $(DESTDIR)$(LIBDIR)/pkgconfig \
	  2>/dev/null || true

# libFuzzer targets for the code that reads untrusted bytes (clang; not part
# of `make check`): test/fuzz/fuzz_NAME.c, linked with the sources of
# FUZZ_NAME_SRC only. `make fuzz` runs each one FUZZ_SECONDS (test/fuzz/run.sh
# says from which corpus); a crash makes it fail.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD = build-fuzz
FUZZ_FLAGS = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 \
             -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -Iengine
FUZZ_TARGETS = decode record_head multi_dispatch msg_id json args consume_queue index_file config \
               zlib lz4 zstd
# The decoders link only the codec (message.c needs only crc32.c); the
# readers of files and the argument parser link the whole engine.
FUZZ_CODEC = engine/message.c engine/crc32.c
FUZZ_decode_SRC = $(FUZZ_CODEC) engine/properties.c engine/java_hash.c
FUZZ_record_head_SRC = $(FUZZ_CODEC) engine/java_hash.c
FUZZ_multi_dispatch_SRC = $(FUZZ_CODEC) engine/multi_dispatch.c engine/properties.c \
                          engine/topic_queue_table.c engine/topic.c engine/rmq_err.c
FUZZ_msg_id_SRC = engine/message_id.c
FUZZ_json_SRC = ext/json.c ext/error.c ext/utf8.c engine/properties.c
FUZZ_json_LIBS = -lsqlite3
FUZZ_args_SRC = ext/args.c ext/error.c ext/utf8.c $(ENGINE_SRC)
FUZZ_args_LIBS = -lsqlite3 $(ENGINE_LDLIBS)
FUZZ_consume_queue_SRC = $(ENGINE_SRC)
FUZZ_consume_queue_LIBS = $(ENGINE_LDLIBS)
FUZZ_index_file_SRC = $(ENGINE_SRC)
FUZZ_index_file_LIBS = $(ENGINE_LDLIBS)
FUZZ_config_SRC = engine/config_json.c engine/topic.c engine/rmq_err.c
# The body codecs, each seeded with streams of its own (test/fuzz/seed).
FUZZ_CODECS = engine/compression.c engine/rmq_err.c
FUZZ_zlib_SRC = $(FUZZ_CODECS)
FUZZ_zlib_LIBS = $(ENGINE_LDLIBS)
FUZZ_lz4_SRC = $(FUZZ_CODECS)
FUZZ_lz4_LIBS = $(ENGINE_LDLIBS)
FUZZ_zstd_SRC = $(FUZZ_CODECS)
FUZZ_zstd_LIBS = $(ENGINE_LDLIBS)

define fuzz_rule
$(FUZZ_BUILD)/fuzz_$(1): test/fuzz/fuzz_$(1).c $$(FUZZ_$(1)_SRC) $(wildcard test/fuzz/*.h) Makefile
	@mkdir -p $$(@D)
	$$(FUZZ_CC) $$(FUZZ_FLAGS) -o $$@ $$< $$(FUZZ_$(1)_SRC) $$(FUZZ_$(1)_LIBS)
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_rule,$(t))))

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

fuzz: fuzz-build
	test/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

FORMAT_SRC = $(sort $(wildcard engine/*.[ch] ext/*.[ch] test/engine/*.[ch] test/bench/*.[ch] \
                               test/fuzz/*.[ch]))
format:
	$(CLANG_FORMAT) -i $(FORMAT_SRC)

format-check:
	@bad=; for f in $(FORMAT_SRC); do \
	  $(CLANG_FORMAT) --dry-run -Werror "$$f" >/dev/null 2>&1 || bad="$$bad $$f"; \
	done; \
	if [ -n "$$bad" ]; then \
	  echo "format-check: clang-format would change:"; printf '  %s\n' $$bad; \
	  echo "format-check: run make format"; exit 1; \
	fi; echo "format-check: $(words $(FORMAT_SRC)) files formatted"

clean:
	rm -rf -- build build-asan build-tsan build-clang build-O0 build-pkg $(FUZZ_BUILD) $(BUILD)

-include $(ENGINE_OBJ:.o=.d) $(EXT_OBJ:.o=.d) $(TESTPROG_OBJ:.o=.d)

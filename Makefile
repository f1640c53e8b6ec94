# pipelined: top-level Makefile.
#
#   make            pipelined, pipelinectl, pipeline-shim, plugins/*.so
#   make check      installs missing Debian packages (etc/deps.sh), builds,
#                   runs every test (tests/run.sh) and lints the man pages
#   make demo       runs a real model's release lifecycle on a private daemon
#                   (tests/tools/demo.sh; DEMO=tiny: the tiny fixture's)
#   make install PREFIX=/usr/local DESTDIR=   /   make uninstall
#   make asan | fuzz | lint-man | bench
#
# Sources are picked up by pattern, so adding a stage, a module or a test
# needs no change here: plugins/NAME.c becomes plugins/NAME.so,
# plugins/lib/*/*.c goes into the plugins' library, daemon/DIR/*.c into
# DIR's archive, tests/unit/test_NAME.c becomes a test binary,
# tests/fuzz/fuzz_NAME.c a fuzz target. The programs are built in daemon/
# (daemon/pipelined, daemon/pipelinectl, daemon/pipeline-shim,
# daemon/pipeline-stage), where the tests and scripts run them from.

PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= cc
PKG_CONFIG ?= pkg-config

PKGS      := libuv sqlite3 libcjson libcurl inih libcrypto libsystemd libmicrohttpd
PLUG_PKGS := libcjson libcurl libcrypto openblas

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2 -Wno-unused-parameter \
           -Wno-format-nonliteral -Wno-format-truncation
# (-Wextra's -Wmissing-field-initializers stays on: key tables and stages
# use designated initializers, PL_KEY_*() and PL_STAGE(), which it allows
# to leave members out.)
ifeq ($(CI),true)
WERROR  ?= -Werror
endif
OPT     ?= -O2 -g
CFLAGS  ?= $(OPT)
# The layers (HACKING.md: Layers): include/pipeline, the ABI, sees nothing
# else; plugins/lib, the plugins' library, sees the ABI and its own
# subjects' headers; the plugins see both; the daemon's directories see
# those and daemon/lib, the daemon (daemon/server, daemon/http) sees its
# own two; the tests and the fuzz targets see everything.
PLIB_DIRS  := $(sort $(dir $(wildcard plugins/lib/*/*.[ch])))
INC_ABI    := -Iinclude
INC_PLIB   := -Iinclude $(patsubst %/,-I%,$(PLIB_DIRS))
INC_DLIB   := $(INC_PLIB) -Idaemon/lib
INC_SERVER := $(INC_DLIB) -Idaemon/server -Idaemon/http
INC_ALL    := $(INC_SERVER) -Idaemon/ctl
LAYER_INC   = $(INC_ALL)
plugins/%.o: LAYER_INC = $(INC_PLIB)
plugins/lib/%.o: LAYER_INC = $(INC_PLIB)
daemon/lib/%.o daemon/shim/%.o: LAYER_INC = $(INC_DLIB)
daemon/server/%.o daemon/http/%.o daemon/stage/%.o daemon/ctl/%.o: LAYER_INC = $(INC_SERVER)
tests/plugins/%.o: LAYER_INC = $(INC_ABI)
ALL_CFLAGS = -std=gnu11 $(WARN) $(WERROR) $(CFLAGS) -D_GNU_SOURCE $(LAYER_INC) \
           -DPL_PREFIX='"$(PREFIX)"' -MMD -MP
PKG_CFLAGS  = $(shell $(PKG_CONFIG) --cflags $(PKGS) $(PLUG_PKGS) 2>/dev/null)
PKG_LIBS    = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
PLUG_LIBS   = $(shell $(PKG_CONFIG) --libs $(PLUG_PKGS) 2>/dev/null) -lm -lpthread

# The daemon's archives (daemon/README): daemon/lib, what every program
# of the daemon's side shares; daemon/server, the daemon's subsystems
# (all but its main, pipelined.c); daemon/http, the HTTP side. A program
# links the archives it calls into, and takes from each only the members
# it uses: pipelinectl links no HTTP server.
DLIB_SRCS    := $(wildcard daemon/lib/*.c)
DLIB_LIB     := daemon/lib/libpldlib.a
SERVER_SRCS  := $(filter-out daemon/server/pipelined.c,$(wildcard daemon/server/*.c))
SERVER_LIB   := daemon/server/libpld.a
HTTP_SRCS    := $(wildcard daemon/http/*.c)
HTTP_LIB     := daemon/http/libplhttp.a
CTL_SRCS     := $(wildcard daemon/ctl/*.c)
CORE_OBJS    := $(DLIB_SRCS:.c=.o) $(SERVER_SRCS:.c=.o) $(HTTP_SRCS:.c=.o)

# A source left where the old layout had it would be built into nothing.
STRAY_SRCS   := $(wildcard daemon/*.c daemon/*.h plugins/common/*.c plugins/common/*.h)
ifneq ($(STRAY_SRCS),)
$(error $(STRAY_SRCS): move into daemon/{lib,server,http,ctl,stage,shim}/ or plugins/lib/SUBJECT/ (daemon/README, plugins/lib/README))
endif

PLIB_SRCS    := $(wildcard plugins/lib/*/*.c)
COMMON_OBJS  := $(PLIB_SRCS:.c=.o)
COMMON_LIB   := plugins/lib/libpl.a

PLUGIN_SRCS  := $(wildcard plugins/*.c)
PLUGINS      := $(PLUGIN_SRCS:.c=.so)

UNIT_SRCS    := $(wildcard tests/unit/test_*.c)
UNIT_TESTS   := $(UNIT_SRCS:.c=)
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAYS := $(patsubst tests/fuzz/fuzz_%.c,tests/fuzz/replay_%,$(FUZZ_SRCS))
TEST_PLUGIN_SRCS := $(wildcard tests/plugins/*.c)
TEST_PLUGINS := $(TEST_PLUGIN_SRCS:.c=.so)

BINS := daemon/pipelined daemon/pipelinectl daemon/pipeline-shim daemon/pipeline-stage

.PHONY: all check demo install uninstall clean asan fuzz lint-man bench deps pyenv tests
all: $(BINS) $(PLUGINS)

deps:
	@etc/deps.sh

# The job programs' ML environment (torch, transformers, PEFT, ...), built
# once into the cache from jobs/requirements.lock.
pyenv: deps
	@tests/tools/pyenv.sh >/dev/null

# Everything compiled here is position-independent: the same objects go
# into plugins and executables.
%.o: %.c
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(DLIB_LIB): $(DLIB_SRCS:.c=.o)
	rm -f $@ && ar rcs $@ $^

$(SERVER_LIB): $(SERVER_SRCS:.c=.o)
	rm -f $@ && ar rcs $@ $^

$(HTTP_LIB): $(HTTP_SRCS:.c=.o)
	rm -f $@ && ar rcs $@ $^

$(COMMON_LIB): $(COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^

# The archives refer to each other (the HTTP side reads through the
# server's wire.c and access.c; the server's control.c asks httpd.c for a
# login code): one group.
group = -Wl,--start-group $(1) -Wl,--end-group

daemon/pipelined: daemon/server/pipelined.o $(SERVER_LIB) $(HTTP_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(CFLAGS) -rdynamic -o $@ $< $(call group,$(filter %.a,$^)) $(PKG_LIBS) $(PLUG_LIBS) -ldl

# pipelinectl: its verbs, and of the server only what `check` and `stage`
# run (the plugin host, the spec; no store writes: host_store.c is the
# scheduler's); no HTTP side, so no libmicrohttpd
# (--as-needed).
daemon/pipelinectl: $(CTL_SRCS:.c=.o) $(SERVER_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(CFLAGS) -Wl,--as-needed -rdynamic -o $@ $(filter %.o,$^) $(call group,$(filter %.a,$^)) $(PKG_LIBS) $(PLUG_LIBS) -ldl

# A stage's run hook as the run's owner (stagerun.c): the host table of
# libpld.a, a plugin loaded at run time; only the libraries it calls
# (--as-needed: each one more is loaded at every stage's start).
daemon/pipeline-stage: daemon/stage/stage.o $(SERVER_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(CFLAGS) -Wl,--as-needed -rdynamic -o $@ $< $(call group,$(filter %.a,$^)) $(PKG_LIBS) $(PLUG_LIBS) -ldl

daemon/pipeline-shim: daemon/shim/shim.o
	$(CC) $(CFLAGS) -o $@ $^

# Plugins: hidden visibility, only pl_plugin_init exported (PL_EXPORT).
plugins/%.so: plugins/%.o $(COMMON_LIB)
	$(CC) $(CFLAGS) -shared -o $@ $< $(COMMON_LIB) $(PLUG_LIBS)
	chmod 0755 $@

tests/plugins/%.so: tests/plugins/%.o
	$(CC) $(CFLAGS) -shared -o $@ $<

tests/unit/test_%: tests/unit/test_%.o $(SERVER_LIB) $(HTTP_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(CFLAGS) -rdynamic -o $@ $< $(call group,$(filter %.a,$^)) $(PKG_LIBS) $(PLUG_LIBS) -ldl

tests: all $(UNIT_TESTS) $(TEST_PLUGINS) $(FUZZ_REPLAYS)

# The libFuzzer targets (`make fuzz`, run with tests/fuzz/run.sh): clang,
# ASan and UBSan with undefined behaviour fatal, objects under build/fuzz,
# linked with the daemon core and the plugins' common code built the same
# way (archives, as for the tests: a target links only what it calls).
FUZZ_CC     ?= clang
FUZZ_DIR    := build/fuzz
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  = -std=gnu11 $(filter-out -Wno-format-truncation,$(WARN)) $(WERROR) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
               -D_GNU_SOURCE $(LAYER_INC) -DPL_PREFIX='"$(PREFIX)"' -MMD -MP
FUZZ_BINS   := $(FUZZ_SRCS:.c=)
.SECONDARY: $(FUZZ_SRCS:%.c=$(FUZZ_DIR)/%.o) $(FUZZ_DIR)/tests/fuzz/replay_main.o

$(FUZZ_DIR)/%.o: LAYER_INC = $(INC_ALL)
$(FUZZ_DIR)/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/libpld.a: $(addprefix $(FUZZ_DIR)/,$(CORE_OBJS))
	rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/libpl.a: $(addprefix $(FUZZ_DIR)/,$(COMMON_OBJS))
	rm -f $@ && ar rcs $@ $^

tests/fuzz/fuzz_%: $(FUZZ_DIR)/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/libpld.a $(FUZZ_DIR)/libpl.a
	$(FUZZ_CC) -g $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(call group,$(filter %.a,$^)) $(PKG_LIBS) $(PLUG_LIBS) -ldl

# Every fuzz target is also built with a plain main that replays its
# corpus under the same sanitizers, without libFuzzer's runtime:
# tests/run.sh runs them, so a finding added to a corpus stays fixed.
tests/fuzz/replay_%: $(FUZZ_DIR)/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/tests/fuzz/replay_main.o \
    $(FUZZ_DIR)/libpld.a $(FUZZ_DIR)/libpl.a
	$(FUZZ_CC) -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -o $@ $(filter %.o,$^) $(call group,$(filter %.a,$^)) $(PKG_LIBS) $(PLUG_LIBS) -ldl

fuzz: $(FUZZ_BINS)

# CI builds the fuzz targets too (building only: tests/fuzz/run.sh runs
# them for a while).
check: deps pyenv
	$(MAKE) tests fuzz
	tests/run.sh

demo: deps pyenv
	$(MAKE) all
	tests/tools/demo.sh

bench: all
	tests/bench/run.sh

lint-man:
	tests/tools/lint-man.sh

asan:
	$(MAKE) clean
	$(MAKE) tests OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	    CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer"

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin \
	    $(DESTDIR)$(PREFIX)/lib/pipelined/plugins $(DESTDIR)$(PREFIX)/lib/pipelined/jobs \
	    $(DESTDIR)$(PREFIX)/include/pipeline $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(PREFIX)/share/man/man3 $(DESTDIR)$(PREFIX)/share/man/man5 \
	    $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/man/man8 \
	    $(DESTDIR)$(PREFIX)/share/pipelined/examples
	install -m 0755 daemon/pipelined $(DESTDIR)$(PREFIX)/sbin/pipelined
	install -m 0755 daemon/pipelinectl $(DESTDIR)$(PREFIX)/bin/pipelinectl
	install -m 0755 daemon/pipeline-shim $(DESTDIR)$(PREFIX)/lib/pipelined/pipeline-shim
	install -m 0755 daemon/pipeline-stage $(DESTDIR)$(PREFIX)/lib/pipelined/pipeline-stage
	install -m 0755 $(PLUGINS) $(DESTDIR)$(PREFIX)/lib/pipelined/plugins/
	cp -R jobs/. $(DESTDIR)$(PREFIX)/lib/pipelined/jobs/
	install -m 0644 include/pipeline/plugin.h $(DESTDIR)$(PREFIX)/include/pipeline/
	for m in man/*.[1-8]; do s=$${m##*.}; install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	cp -R etc/examples/. $(DESTDIR)$(PREFIX)/share/pipelined/examples/
	install -d $(DESTDIR)$(PREFIX)/share/pipelined/web
	install -m 0644 etc/web/index.html etc/web/app.js etc/web/app.css $(DESTDIR)$(PREFIX)/share/pipelined/web/
	install -m 0644 etc/pipelined.service $(DESTDIR)$(PREFIX)/share/pipelined/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	    $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 0644 etc/completion/pipelinectl.bash \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/pipelinectl
	install -m 0644 etc/completion/_pipelinectl $(DESTDIR)$(PREFIX)/share/zsh/site-functions/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/sbin/pipelined $(DESTDIR)$(PREFIX)/bin/pipelinectl
	rm -rf $(DESTDIR)$(PREFIX)/lib/pipelined $(DESTDIR)$(PREFIX)/include/pipeline \
	    $(DESTDIR)$(PREFIX)/share/pipelined
	for m in man/*.[1-8]; do b=$${m##*/}; s=$${m##*.}; rm -f $(DESTDIR)$(PREFIX)/share/man/man$$s/$$b; done
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/pipelinectl \
	    $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_pipelinectl

clean:
	rm -f daemon/*/*.o daemon/*/*.d daemon/*/*.a plugins/*.o plugins/*.d plugins/*.so \
	    plugins/lib/*/*.o plugins/lib/*/*.d $(COMMON_LIB) $(BINS) \
	    tests/unit/*.o tests/unit/*.d $(UNIT_TESTS) tests/fuzz/*.o tests/fuzz/*.d $(FUZZ_REPLAYS) $(FUZZ_BINS) tests/plugins/*.o tests/plugins/*.d tests/plugins/*.so
	rm -rf $(FUZZ_DIR)

-include $(wildcard daemon/*/*.d plugins/*.d plugins/lib/*/*.d tests/unit/*.d tests/plugins/*.d tests/fuzz/*.d \
    $(FUZZ_DIR)/*/*.d $(FUZZ_DIR)/*/*/*.d)

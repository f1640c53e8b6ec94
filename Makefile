# pipelined: top-level Makefile.
#
#   make            pipelined, pipelinectl, pipeline-shim, plugins/*.so
#   make check      installs missing Debian packages (etc/deps.sh), builds,
#                   runs every test (tests/run.sh) and lints the man pages
#   make demo       runs a real model's release lifecycle on a private daemon
#                   (tests/tools/demo.sh; DEMO=tiny: the tiny fixture's;
#                   DEMO_KEEP=1 keeps its state directory, else removed on success)
#   PYSTACK=current make check | demo   the same on the current ML stack
#                   (jobs/requirements-current.lock; default recipe)
#   make install PREFIX=/usr/local DESTDIR=   /   make uninstall
#                   (also SYSCONFDIR, UNITDIR, SYSUSERSDIR, TMPFILESDIR)
#   make asan | fuzz | lint-man | bench | jobkeys
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
# Where make install puts the configuration (installed only when none is
# there), the systemd unit, and the sysusers.d and tmpfiles.d files. The
# programs find their own files from where they are installed, so one build
# installs under any PREFIX (pipelined(8), FILES).
SYSCONFDIR  ?= $(PREFIX)/etc
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
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
# Hardening: the flags Debian's packages are built with, from
# dpkg-buildflags with DEB_BUILD_MAINT_OPTIONS=hardening=+all (its -g, -O
# and -ffile-prefix-map left to OPT), else the same written out: stack
# protector (strong), _FORTIFY_SOURCE=2 (which needs optimisation, and is
# left out under AddressSanitizer, which checks the same calls), format
# checks, full RELRO and BIND_NOW. Every object is -fPIC, so the programs
# link as PIE (-pie). `make HARDEN=` builds without any of it.
HARDEN  ?= 1
DPKG_BUILDFLAGS := $(shell command -v dpkg-buildflags 2>/dev/null)
ifneq ($(DPKG_BUILDFLAGS),)
hardflags = $(filter-out -g -O% -ffile-prefix-map=%,$(shell DEB_BUILD_MAINT_OPTIONS=hardening=+all \
            $(DPKG_BUILDFLAGS) --get $(1) 2>/dev/null))
HARD_CFLAGS   := $(call hardflags,CFLAGS)
HARD_CPPFLAGS := $(call hardflags,CPPFLAGS)
HARD_LDFLAGS  := $(call hardflags,LDFLAGS)
else
HARD_CFLAGS   := -fstack-protector-strong -Wformat -Werror=format-security
HARD_CPPFLAGS := -Wdate-time -D_FORTIFY_SOURCE=2
HARD_LDFLAGS  := -Wl,-z,relro -Wl,-z,now
endif
ifeq ($(filter -O1 -O2 -O3 -Os -Og -Ofast,$(CFLAGS)),)
HARD_CPPFLAGS := $(filter-out -D_FORTIFY_SOURCE=%,$(HARD_CPPFLAGS))
endif
ifneq ($(filter -fsanitize=address%,$(CFLAGS)),)
HARD_CPPFLAGS := $(filter-out -D_FORTIFY_SOURCE=%,$(HARD_CPPFLAGS))
endif
ifeq ($(HARDEN),1)
HARDEN_CFLAGS  := $(HARD_CFLAGS) $(patsubst -D_FORTIFY_SOURCE=%,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=%,$(HARD_CPPFLAGS))
HARDEN_LDFLAGS := $(HARD_LDFLAGS)
HARDEN_PIE     := -pie
endif
# What every link gets; programs add -pie.
LINK_FLAGS  = $(CFLAGS) $(HARDEN_LDFLAGS) $(LDFLAGS)
# The layers (HACKING.md: Layers): include/pipeline, the ABI, sees nothing
# else; plugins/lib, the plugins' library, sees the ABI and its own
# subjects' headers; the plugins see both; the daemon's directories see
# those and daemon/lib (pld.h); the server, pipelinectl and pipeline-stage
# daemon/server too (pipelinectl and pipeline-stage its host.h only); the
# HTTP side and pipelined.c, which runs it, daemon/http too (http.h); the
# tests and the fuzz targets see everything. Which header of daemon/server
# a directory may include is tests/tools/check-layers.sh's to check.
PLIB_DIRS  := $(sort $(dir $(wildcard plugins/lib/*/*.[ch])))
INC_ABI    := -Iinclude
INC_PLIB   := -Iinclude $(patsubst %/,-I%,$(PLIB_DIRS))
INC_DLIB   := $(INC_PLIB) -Idaemon/lib
INC_SERVER := $(INC_DLIB) -Idaemon/server
INC_HTTP   := $(INC_SERVER) -Idaemon/http
INC_ALL    := $(INC_HTTP) -Idaemon/ctl
LAYER_INC   = $(INC_ALL)
plugins/%.o: LAYER_INC = $(INC_PLIB)
plugins/lib/%.o: LAYER_INC = $(INC_PLIB)
daemon/lib/%.o daemon/shim/%.o: LAYER_INC = $(INC_DLIB)
daemon/server/%.o daemon/stage/%.o daemon/ctl/%.o: LAYER_INC = $(INC_SERVER)
daemon/http/%.o daemon/server/pipelined.o: LAYER_INC = $(INC_HTTP)
tests/plugins/%.o: LAYER_INC = $(INC_ABI)
ALL_CFLAGS = -std=gnu11 $(WARN) $(WERROR) $(CFLAGS) $(HARDEN_CFLAGS) -D_GNU_SOURCE $(LAYER_INC) \
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

.PHONY: all check demo install uninstall clean asan fuzz lint-man bench deps pyenv pyenv-current tests jobkeys
all: $(BINS) $(PLUGINS)

deps:
	@etc/deps.sh

# The job programs' ML environment (torch, transformers, PEFT, ...), built
# once into the cache from the lock of the stack PYSTACK names: recipe (the
# default, jobs/requirements.lock) or current
# (jobs/requirements-current.lock). `make check PYSTACK=current` runs
# every test of the hf engine on the current stack, `make demo
# PYSTACK=current` the demo.
PYSTACK ?= recipe
export PYSTACK
pyenv: deps
	@tests/tools/pyenv.sh >/dev/null

# The current stack's environment, which make check's second pass of the
# fast hf tests (pystack/current-*) runs on whatever PYSTACK says (about
# 3 GB more of wheels the first time).
pyenv-current: deps
	@PYSTACK=current tests/tools/pyenv.sh >/dev/null

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

# Each program links its archives once, each before what it calls: the
# HTTP side (it reads through the store's read-only handle and access.c), the
# server, the daemon's lib, the plugins' common code. Nothing calls back
# up the list (control.c gets the page's login code from pipelined.c, in
# its struct listen_ctx), so no --start-group: a call against the layers
# is a link error.
daemon/pipelined: daemon/server/pipelined.o $(HTTP_LIB) $(SERVER_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(LINK_FLAGS) $(HARDEN_PIE) -rdynamic -o $@ $< $(filter %.a,$^) $(PKG_LIBS) $(PLUG_LIBS) -ldl

# pipelinectl: its verbs, and of the server only what `check` and `stage`
# run (the plugin host, the spec; no store writes: host_store.c is the
# scheduler's); no HTTP side, so no libmicrohttpd
# (--as-needed).
daemon/pipelinectl: $(CTL_SRCS:.c=.o) $(SERVER_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(LINK_FLAGS) $(HARDEN_PIE) -Wl,--as-needed -rdynamic -o $@ $(filter %.o,$^) $(filter %.a,$^) $(PKG_LIBS) $(PLUG_LIBS) -ldl

# A stage's run hook as the run's owner (stagerun.c): the host table of
# libpld.a, a plugin loaded at run time; only the libraries it calls
# (--as-needed: each one more is loaded at every stage's start).
daemon/pipeline-stage: daemon/stage/stage.o $(SERVER_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(LINK_FLAGS) $(HARDEN_PIE) -Wl,--as-needed -rdynamic -o $@ $< $(filter %.a,$^) $(PKG_LIBS) $(PLUG_LIBS) -ldl

daemon/pipeline-shim: daemon/shim/shim.o daemon/lib/procstat.o
	$(CC) $(LINK_FLAGS) $(HARDEN_PIE) -o $@ $^

# The objects that only a pattern chain names (plugins/NAME.o for
# plugins/NAME.so, a unit test's, a test plugin's) are kept: make would
# delete them as intermediate after the first build, and a later make
# (make install, with their .d files included now) would then build them,
# and everything linked from them, again.
.SECONDARY: $(PLUGIN_SRCS:.c=.o) $(TEST_PLUGIN_SRCS:.c=.o) $(UNIT_SRCS:.c=.o)

# Plugins: hidden visibility, only pl_plugin_init exported (PL_EXPORT).
plugins/%.so: plugins/%.o $(COMMON_LIB)
	$(CC) $(LINK_FLAGS) -shared -o $@ $< $(COMMON_LIB) $(PLUG_LIBS)
	chmod 0755 $@

tests/plugins/%.so: tests/plugins/%.o
	$(CC) $(LINK_FLAGS) -shared -o $@ $<

tests/unit/test_%: tests/unit/test_%.o $(HTTP_LIB) $(SERVER_LIB) $(DLIB_LIB) $(COMMON_LIB)
	$(CC) $(LINK_FLAGS) $(HARDEN_PIE) -rdynamic -o $@ $< $(filter %.a,$^) $(PKG_LIBS) $(PLUG_LIBS) -ldl

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
	$(FUZZ_CC) -g $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< $(filter %.a,$^) $(PKG_LIBS) $(PLUG_LIBS) -ldl

# Every fuzz target is also built with a plain main that replays its
# corpus under the same sanitizers, without libFuzzer's runtime:
# tests/run.sh runs them, so a finding added to a corpus stays fixed.
tests/fuzz/replay_%: $(FUZZ_DIR)/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/tests/fuzz/replay_main.o \
    $(FUZZ_DIR)/libpld.a $(FUZZ_DIR)/libpl.a
	$(FUZZ_CC) -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -o $@ $(filter %.o,$^) $(filter %.a,$^) $(PKG_LIBS) $(PLUG_LIBS) -ldl

fuzz: $(FUZZ_BINS)

# CI builds the fuzz targets too: tests/run.sh replays their corpora and
# fuzzes each for 20 s (fuzz/smoke-NAME); tests/fuzz/run.sh runs them
# for longer.
check: deps pyenv pyenv-current
	$(MAKE) tests fuzz
	tests/run.sh

demo: deps pyenv
	$(MAKE) all
	tests/tools/demo.sh

bench: all
	tests/bench/run.sh

lint-man:
	tests/tools/lint-man.sh

# jobs/pljob/keys.py from the train, probe and tokenize plugins' key tables
# (commit it after changing one of their keys; train/job-keys fails while
# it is stale).
jobkeys: all
	tests/tools/gen-jobkeys.sh

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
	    $(DESTDIR)$(PREFIX)/share/pipelined/examples $(DESTDIR)$(SYSCONFDIR) \
	    $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR)
	install -m 0755 daemon/pipelined $(DESTDIR)$(PREFIX)/sbin/pipelined
	install -m 0755 daemon/pipelinectl $(DESTDIR)$(PREFIX)/bin/pipelinectl
	install -m 0755 daemon/pipeline-shim $(DESTDIR)$(PREFIX)/lib/pipelined/pipeline-shim
	install -m 0755 daemon/pipeline-stage $(DESTDIR)$(PREFIX)/lib/pipelined/pipeline-stage
	install -m 0755 $(PLUGINS) $(DESTDIR)$(PREFIX)/lib/pipelined/plugins/
	cp -R jobs/. $(DESTDIR)$(PREFIX)/lib/pipelined/jobs/
	install -m 0644 include/pipeline/plugin.h $(DESTDIR)$(PREFIX)/include/pipeline/
	for m in man/*.[1-8]; do s=$${m##*.}; install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done
	cp -R etc/examples/. $(DESTDIR)$(PREFIX)/share/pipelined/examples/
	install -m 0644 etc/Modelfile.tmpl $(DESTDIR)$(PREFIX)/share/pipelined/Modelfile.tmpl
	install -d $(DESTDIR)$(PREFIX)/share/pipelined/web
	install -m 0644 etc/web/index.html etc/web/app.js etc/web/app.css $(DESTDIR)$(PREFIX)/share/pipelined/web/
	install -m 0644 etc/pipelined.conf.dist $(DESTDIR)$(PREFIX)/share/pipelined/pipelined.conf.example
	test -e $(DESTDIR)$(SYSCONFDIR)/pipelined.conf || \
	    install -m 0640 etc/pipelined.conf.dist $(DESTDIR)$(SYSCONFDIR)/pipelined.conf
	sed -e 's|@SBINDIR@|$(PREFIX)/sbin|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	    etc/pipelined.service.in >$(DESTDIR)$(UNITDIR)/pipelined.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/pipelined.service
	install -m 0644 etc/pipelined.sysusers $(DESTDIR)$(SYSUSERSDIR)/pipelined.conf
	install -m 0644 etc/pipelined.tmpfiles $(DESTDIR)$(TMPFILESDIR)/pipelined.conf
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	    $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 0644 etc/completion/pipelinectl.bash \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/pipelinectl
	install -m 0644 etc/completion/_pipelinectl $(DESTDIR)$(PREFIX)/share/zsh/site-functions/

# The configuration goes only when it is the one installed, unchanged.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/sbin/pipelined $(DESTDIR)$(PREFIX)/bin/pipelinectl
	rm -rf $(DESTDIR)$(PREFIX)/lib/pipelined $(DESTDIR)$(PREFIX)/include/pipeline \
	    $(DESTDIR)$(PREFIX)/share/pipelined
	for m in man/*.[1-8]; do b=$${m##*/}; s=$${m##*.}; rm -f $(DESTDIR)$(PREFIX)/share/man/man$$s/$$b; done
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/pipelinectl \
	    $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_pipelinectl \
	    $(DESTDIR)$(UNITDIR)/pipelined.service $(DESTDIR)$(SYSUSERSDIR)/pipelined.conf \
	    $(DESTDIR)$(TMPFILESDIR)/pipelined.conf
	if cmp -s etc/pipelined.conf.dist $(DESTDIR)$(SYSCONFDIR)/pipelined.conf; then \
	    rm -f $(DESTDIR)$(SYSCONFDIR)/pipelined.conf; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/pipelined.conf ]; then \
	    echo "$(DESTDIR)$(SYSCONFDIR)/pipelined.conf: changed since it was installed: kept"; fi

clean:
	rm -f daemon/*/*.o daemon/*/*.d daemon/*/*.a plugins/*.o plugins/*.d plugins/*.so \
	    plugins/lib/*/*.o plugins/lib/*/*.d $(COMMON_LIB) $(BINS) \
	    tests/unit/*.o tests/unit/*.d $(UNIT_TESTS) tests/fuzz/*.o tests/fuzz/*.d $(FUZZ_REPLAYS) $(FUZZ_BINS) tests/plugins/*.o tests/plugins/*.d tests/plugins/*.so
	rm -rf $(FUZZ_DIR)

-include $(wildcard daemon/*/*.d plugins/*.d plugins/lib/*/*.d tests/unit/*.d tests/plugins/*.d tests/fuzz/*.d \
    $(FUZZ_DIR)/*/*.d $(FUZZ_DIR)/*/*/*.d)

# outbox: PostgreSQL extension, built with PGXS.
EXTENSION = outbox
EXTVERSION = 0.7.0
# The PostgreSQL majors that are tested (CI, .ci/run): the one list. test/versions.sh checks
# outbox.control, META.json, README.md, docs/install.md, debian/pgversions and .ci/run
# against it. Others may build (docs/install.md) but are not tested.
PG_MAJORS = 15 18
MODULE_big = outbox
# What of src/sinks is outbox.so's too: the option rules (src/sinks/common/option_rules.cpp
# and option_files.cpp), which configure_sink applies before a sink sees its options
# (src/pg/sink_loader.cpp), and the sink host (src/sinks/host/: the C interface's loader, and
# the relay's side of a sink in its own process), without the host program's main().
SRCS = $(wildcard src/*.cpp src/core/*.cpp src/pg/*.cpp src/relay/*.cpp) \
	src/sinks/common/option_rules.cpp src/sinks/common/option_files.cpp \
	$(filter-out src/sinks/host/sink_host_main.cpp,$(wildcard src/sinks/host/*.cpp))
# The C sink interface and its signal helper, for third-party sinks: installed into
# $(includedir_server)/extension/outbox/.
HEADERS = src/include/outbox_sink.h src/include/outbox_sink_signals.h
OBJS = $(SRCS:.cpp=.o)
# The install and update scripts sit beside outbox.control (as in contrib): test/sql/ holds
# only the pg_regress tests.
DATA = $(wildcard outbox--*.sql)
PGFILEDESC = "outbox - transactional outbox for PostgreSQL"
# Set before PGXS, which reads it when included. .pg_build: see below.
EXTRA_CLEAN = .pg_build test/isolation/output

# pg_regress: test/sql/<test>.sql against test/expected/<test>.out. test/run-tests.sh's "schedule"
# suite fails when a test is not listed here.
REGRESS = setup enqueue enqueue_errors batch rotate replay inbox dead_letters delivery_log relay_config privileges metrics install_security
REGRESS_OPTS = --inputdir=test
ISOLATION = $(basename $(notdir $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation/output
# The isolation tests' settings. They reach the tests' sessions through PGOPTIONS (below), so
# that `make installcheck` runs against a server in its default configuration. One-second
# partitions and a short retention: a partition expires during a test. rotate_lock_timeout 0
# (NOWAIT): a lock wait of even a few ms would be seen by the isolation tester as blocking,
# and make the order of steps depend on timing.
ISOLATION_PGOPTIONS = -c outbox.partition_interval=1s -c outbox.retention=1s \
	-c outbox.premake=1 -c outbox.rotate_lock_timeout=0

# C++ settings (before PGXS reads them). No LLVM bitcode: JIT inlining of C++ is not useful.
override with_llvm = no
PG_CXXFLAGS += -std=c++17 -Wall -Wextra -Werror -Wno-register -fno-omit-frame-pointer
# The library's version, in its magic block on PostgreSQL 18 (src/pg/pg_compat.hpp).
PG_CPPFLAGS += -DOUTBOX_VERSION='"$(EXTVERSION)"'
SHLIB_LINK += -lstdc++

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PostgreSQL's headers come in as system headers, so that their warnings do not fail the
# -Werror build of our own code.
override CPPFLAGS := -I$(srcdir)/src $(patsubst -I$(includedir_server),-isystem $(includedir_server),$(patsubst -I$(includedir_internal),-isystem $(includedir_internal),$(CPPFLAGS)))

# PGXS tracks no header dependencies here: every object depends on every header of src/, so
# that a changed header (outbox_sink.h, say) rebuilds what includes it.
$(OBJS): $(wildcard src/*.hpp src/*/*.hpp)

# Objects compiled against another PostgreSQL (another PG_CONFIG, such as the assert-enabled
# build) are rebuilt: .pg_build names the installation they were compiled for.
PG_BUILD := $(PGXS) $(VERSION) $(CFLAGS) $(EXTVERSION)
ifneq ($(PG_BUILD),$(file < .pg_build))
$(file > .pg_build,$(PG_BUILD))
endif
$(OBJS): .pg_build

# make installcheck: pg_regress, then the isolation tests, against a running server where
# outbox is installed (PGHOST, PGPORT, PGUSER: a superuser). Their sessions alone get the
# isolation settings (the command is a recipe line of its own); a simply expanded variable,
# so that $$PGOPTIONS reaches the shell as is.
pg_isolation_regress_installcheck := export PGOPTIONS="$$PGOPTIONS $(ISOLATION_PGOPTIONS)" && \
	$(pg_isolation_regress_installcheck)

# make prove_installcheck: the TAP tests, test/t/*.pl (PROVE_TESTS='test/t/010_relay_null.pl'
# picks some, PROVE_FLAGS=--verbose adds flags to prove). Each test starts servers of its own
# with PG_CONFIG's binaries and the installed outbox, so it needs `make install` first, and a
# user PostgreSQL runs as (not root). Not part of installcheck (PGXS's TAP_TESTS): these
# tests start no server of the caller's, and need the Kafka mock and kcat.
PROVE_TESTS ?= test/t/*.pl
.PHONY: prove_installcheck
prove_installcheck: test-tools
	$(if $(filter yes,$(enable_tap_tests)),,$(error $(PG_CONFIG) comes from a PostgreSQL built without --enable-tap-tests))
	$(if $(filter 0,$(shell id -u)),$(error prove_installcheck: PostgreSQL does not run as root; run it as the postgres user))
	$(prove_installcheck)

.PHONY: unit-tests format format-check
unit-tests:
	$(MAKE) -C test/unit run

# Every C++ file we write (SINK_SRCS and TOOL_SRCS come from src/sinks/sinks.mk, below).
FORMATTED = $(sort $(SRCS) $(SINK_SRCS) $(TOOL_SRCS) $(wildcard src/*/*.hpp src/*/*/*.hpp src/*.hpp src/include/*.h test/unit/*.cpp test/unit/*.hpp test/modules/*/*.cpp))

format-check:
	clang-format --dry-run --Werror $(FORMATTED)

format:
	clang-format -i $(FORMATTED)

# Sink libraries (outbox_sink_<name>.so), the sink host program (outbox_sink_host) and the
# test tools: see src/sinks/sinks.mk. Their unit tests are built by test/unit/Makefile.
-include src/sinks/sinks.mk

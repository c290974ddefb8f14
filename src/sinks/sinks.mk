# Sink libraries (outbox_sink_<name>.so) and the Kafka mock tool. Included at the end of the
# top-level Makefile, after PGXS. Plain C++17: no PostgreSQL header, no PGXS compile flags.
#
#   make               also builds outbox_sink_null.so, outbox_sink_kafka.so,
#                      outbox_sink_http.so and outbox_sink_nats.so
#   make install       also installs them into $(DESTDIR)$(pkglibdir), with outbox_sink_host,
#                      the program a relay runs its sink in (outbox.sink_isolation = process)
#   make clean         also removes them and the test tools
#   make sinks         only the sink libraries
#   make test-tools    test/tools/outbox_kafka_mock, for the TAP tests, scripts/demo.sh and
#                      bench/relay (not shipped, so not part of `make`)

# Each library is its folder plus what it takes from src/sinks/common/.
SINK_RULES = src/sinks/common/option_rules.cpp src/sinks/common/option_files.cpp
SINK_EXPORT = $(SINK_RULES) src/sinks/common/plugin_export.cpp
SINK_EVENTS = src/sinks/common/event_template.cpp src/sinks/common/cloudevents.cpp
NULL_SRCS = $(wildcard src/sinks/null/*.cpp) $(SINK_EXPORT)
KAFKA_SRCS = $(wildcard src/sinks/kafka/*.cpp) $(SINK_EXPORT) $(SINK_EVENTS)
HTTP_SRCS = $(wildcard src/sinks/http/*.cpp) $(SINK_EXPORT) $(SINK_EVENTS)
NATS_SRCS = $(wildcard src/sinks/nats/*.cpp) $(SINK_EXPORT) $(SINK_EVENTS)
HOST_SRCS = src/sinks/host/sink_host_main.cpp src/sinks/host/channel.cpp src/sinks/host/wire.cpp \
	src/sinks/host/plugin_host.cpp $(SINK_RULES)
# Every source, for the format targets (headers are covered by src/*/*/*.hpp there).
SINK_SRCS = $(wildcard src/sinks/*/*.cpp)
TOOL_SRCS = test/tools/kafka_mock.cpp

SINK_HDRS = $(wildcard src/sinks/*/*.hpp) src/include/outbox_sink.h
SINK_LIBS = outbox_sink_null$(DLSUFFIX) outbox_sink_kafka$(DLSUFFIX) outbox_sink_http$(DLSUFFIX) \
	outbox_sink_nats$(DLSUFFIX)
KAFKA_MOCK = test/tools/outbox_kafka_mock
SINK_HOST = outbox_sink_host

SINK_CXXFLAGS = -std=c++17 -O2 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -I$(srcdir)/src
# Only outbox_sink_init is exported; everything else stays inside the library, so two
# plugins (or a plugin and outbox.so) never bind to each other's symbols.
SINK_SO_FLAGS = -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden \
	-Wl,--no-undefined -Wl,-z,now

.PHONY: sinks test-tools install-sinks clean-sinks
all: sinks
sinks: $(SINK_LIBS) $(SINK_HOST)
test-tools: $(KAFKA_MOCK)

outbox_sink_null$(DLSUFFIX): $(NULL_SRCS) $(SINK_HDRS)
	$(CXX) $(SINK_CXXFLAGS) $(SINK_SO_FLAGS) -o $@ $(filter %.cpp,$^)

outbox_sink_kafka$(DLSUFFIX): $(KAFKA_SRCS) $(SINK_HDRS)
	$(CXX) $(SINK_CXXFLAGS) $(SINK_SO_FLAGS) -o $@ $(filter %.cpp,$^) -lrdkafka

outbox_sink_http$(DLSUFFIX): $(HTTP_SRCS) $(SINK_HDRS)
	$(CXX) $(SINK_CXXFLAGS) $(SINK_SO_FLAGS) -o $@ $(filter %.cpp,$^) -lcurl -lcrypto

# NATS JetStream, through cnats (Debian libnats-dev at build time, libnats3.x at run time).
outbox_sink_nats$(DLSUFFIX): $(NATS_SRCS) $(SINK_HDRS)
	$(CXX) $(SINK_CXXFLAGS) $(SINK_SO_FLAGS) -o $@ $(filter %.cpp,$^) -lnats -pthread

# The sink host: a plain program (no PostgreSQL), the relay's child when it isolates its sink.
$(SINK_HOST): $(HOST_SRCS) $(SINK_HDRS)
	$(CXX) $(SINK_CXXFLAGS) -o $@ $(filter %.cpp,$^) -ldl -pthread

$(KAFKA_MOCK): $(TOOL_SRCS)
	$(CXX) $(SINK_CXXFLAGS) -o $@ $(TOOL_SRCS) -lrdkafka -pthread

install: install-sinks
install-sinks: $(SINK_LIBS) $(SINK_HOST)
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)'
	$(INSTALL_SHLIB) $(SINK_LIBS) '$(DESTDIR)$(pkglibdir)/'
	$(INSTALL_PROGRAM) $(SINK_HOST) '$(DESTDIR)$(pkglibdir)/'

uninstall: uninstall-sinks
.PHONY: uninstall-sinks
uninstall-sinks:
	rm -f $(addprefix '$(DESTDIR)$(pkglibdir)'/,$(SINK_LIBS) $(SINK_HOST))

clean: clean-sinks
clean-sinks:
	rm -f $(SINK_LIBS) $(SINK_HOST) $(KAFKA_MOCK)

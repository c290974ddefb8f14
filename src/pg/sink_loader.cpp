#include "pg/sink_loader.hpp"

#include <dlfcn.h>

#include <vector>

#include "pg/boundary.hpp"
#include "pg/jsonb_object.hpp"
#include "pg/settings.hpp"
#include "sinks/common/option_rules.hpp"
#include "sinks/host/plugin_host.hpp"
#include "sinks/host/process_sink.hpp"
#include "sinks/common/signals_blocked.hpp"

namespace outbox::pg {
namespace {

struct RawOption {
  char* key;
  char* value;
};

struct RawOptions {
  int count;
  RawOption* items;
  bool not_object;
  char* bad_key;  // a key whose value is an object, array or null
};

bool valid_sink_name(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

sinks::Options sink_options_from_jsonb(const char* function, Jsonb* options) {
  RawOptions raw = guard([&]() -> RawOptions {
    RawOptions out{};
    if (!JB_ROOT_IS_OBJECT(options)) {
      out.not_object = true;
      return out;
    }
    out.items = static_cast<RawOption*>(palloc0(sizeof(RawOption) * (JB_ROOT_COUNT(options) + 1)));
    for_each_member(&options->root, [&](const JsonbValue& k, const JsonbValue& v) {
      char* key = pnstrdup(k.val.string.val, k.val.string.len);
      char* value = nullptr;
      if (v.type == jbvString) {
        value = pnstrdup(v.val.string.val, v.val.string.len);
      } else if (v.type == jbvNumeric) {
        value = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
      } else if (v.type == jbvBool) {
        value = pstrdup(v.val.boolean ? "true" : "false");
      } else {
        out.bad_key = key;
        return false;
      }
      out.items[out.count++] = {key, value};
      return true;
    });
    return out;
  });
  if (raw.not_object) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": options must be a JSON object", {},
                R"(For example '{"bootstrap.servers": "broker1:9092"}'.)");
  }
  if (raw.bad_key != nullptr) {
    throw Error(sqlstate::kInvalidParameterValue, std::string(function) + ": option \"" +
                                                      raw.bad_key +
                                                      "\" must be a string, number or boolean");
  }
  sinks::Options result;
  result.reserve(raw.count);
  for (int i = 0; i < raw.count; ++i) result.emplace_back(raw.items[i].key, raw.items[i].value);
  return result;
}

sinks::PluginHost load_sink(const char* function, const std::string& name) {
  if (!valid_sink_name(name)) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": invalid sink name \"" + name + "\"", {},
                "A sink name is lower-case letters, digits and underscores, such as kafka.");
  }
  // Sink libraries are plain C++ without PostgreSQL's magic block, so they are opened with
  // dlopen rather than load_external_function. A library stays loaded for the process.
  const std::string library = std::string(pkglib_path) + "/outbox_sink_" + name + ".so";
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": no sink named \"" + name + "\"", why ? why : library,
                "Built-in sinks are null, kafka, http and nats. A third-party sink is a "
                "library outbox_sink_<name>.so in PostgreSQL's $libdir.");
  }
  auto init = reinterpret_cast<OutboxSinkInitFn>(dlsym(handle, OUTBOX_SINK_INIT_SYMBOL));
  if (init == nullptr) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": " + library + " is not an outbox sink",
                "It does not export " OUTBOX_SINK_INIT_SYMBOL ".",
                "A sink is built against outbox_sink.h (pg_config --includedir-server, "
                "extension/outbox).");
  }
  try {
    return sinks::PluginHost(init(), name);
  } catch (const sinks::ConfigError& e) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": sink \"" + name + "\" cannot be used", e.what());
  }
}

std::unique_ptr<sinks::Sink> create_sink(const char* function, const std::string& name,
                                         const sinks::Options& options) {
  const sinks::PluginHost plugin = load_sink(function, name);
  const std::string library = std::string(pkglib_path) + "/outbox_sink_" + name + ".so";
  try {
    // Files and secrets as the sink receives them; the secrets' values live only in here.
    const char* directory = settings.sink_files_directory;
    const sinks::Options resolved = sinks::resolve_options(name, plugin.options(), options,
                                                           directory != nullptr ? directory : "");
    sinks::SignalsBlocked blocked;
    if (settings.sink_isolation == kSinkIsolationProcess) {
      // The sink runs in outbox_sink_host, a child that is not a PostgreSQL process: its crash
      // does not restart the server. The options (secrets too) go over a socket, not argv.
      sinks::ProcessSinkConfig config;
      config.program = std::string(pkglib_path) + "/outbox_sink_host";
      config.library = library;
      config.name = name;
      config.resolved = resolved;
      return sinks::ProcessSink::spawn(config);
    }
    return plugin.create(resolved);
  } catch (const sinks::OptionError& e) {
    throw Error(sqlstate::kInvalidParameterValue, std::string(function) + ": " + e.what(), {},
                e.hint());
  } catch (const sinks::ConfigError& e) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": invalid options for sink \"" + name + "\"", e.what());
  }
}

}  // namespace outbox::pg

namespace {

// Room for the key and the id and type headers, besides the payload and the event's headers.
constexpr long long kMessageOverheadBytes = 4096;

// configure_sink's warning when the sink cannot deliver every event that enqueue accepts.
void warn_if_limit_too_low(const std::string& name, const outbox::sinks::Sink& sink) {
  using outbox::pg::settings;
  const std::size_t limit = sink.max_message_bytes();
  const long long largest = static_cast<long long>(settings.max_payload_bytes) +
                            settings.max_headers_bytes + kMessageOverheadBytes;
  if (limit == 0 || static_cast<long long>(limit) >= largest) return;
  const std::string message = "outbox.configure_sink: sink \"" + name +
                              "\" delivers messages of at most " + std::to_string(limit) +
                              " bytes, but an event may take up to " + std::to_string(largest) +
                              " bytes";
  const std::string detail =
      "outbox.max_payload_bytes (" + std::to_string(settings.max_payload_bytes) +
      ") + outbox.max_headers_bytes (" + std::to_string(settings.max_headers_bytes) + ") + " +
      std::to_string(kMessageOverheadBytes) +
      " for the key and the id and type headers. Larger events would be rejected by the sink "
      "and dead-lettered.";
  const char* hint =
      "Raise the sink's limit (for Kafka, message.max.bytes, and the brokers' and topics' "
      "max.message.bytes with it) or lower outbox.max_payload_bytes.";
  outbox::pg::guard([&] {
    ereport(WARNING, (errmsg_internal("%s", message.c_str()),
                      errdetail_internal("%s", detail.c_str()), errhint("%s", hint)));
  });
}

}  // namespace

// outbox._check_sink(sink, options): creates the sink once to check it; returns its
// description (never credentials). Its errors leave the statement and the context out of the
// server log: a refused configure_sink may hold a secret given inline.
OUTBOX_FUNCTION(outbox_check_sink) {
  const char* function = "outbox.configure_sink";
  try {
    std::string name = outbox::pg::guard([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
    Jsonb* options_json = outbox::pg::guard([&] { return PG_GETARG_JSONB_P(1); });
    auto options = outbox::pg::sink_options_from_jsonb(function, options_json);
    auto sink = outbox::pg::create_sink(function, name, options);
    std::string description = sink->describe();
    warn_if_limit_too_low(name, *sink);
    sink.reset();
    return outbox::pg::guard([&] { return CStringGetTextDatum(description.c_str()); });
  } catch (outbox::Error& e) {
    e.set_hide_statement(true);
    throw;
  } catch (const outbox::pg::PgError& e) {
    e.data()->hide_stmt = true;
    e.data()->hide_ctx = true;
    throw;
  }
}

// outbox.sink_options(sink): the options the sink declares (those configure_sink checks), with
// their kind and description: the built-in sinks' and a third party's alike.
OUTBOX_FUNCTION(outbox_sink_options) {
  const char* function = "outbox.sink_options";
  std::string name = outbox::pg::guard([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
  const outbox::sinks::PluginHost plugin = outbox::pg::load_sink(function, name);
  const outbox::sinks::OptionTable table = plugin.options();
  // The rows' texts first, outside guard(): an ERROR there would skip a std::string's
  // destructor.
  std::vector<std::string> keys;
  std::vector<const char*> kinds;
  for (std::size_t i = 0; i < table.count; ++i) {
    const outbox::sinks::OptionSpec& spec = table.specs[i];
    using outbox::sinks::OptionKind;
    const bool secret = spec.kind == OptionKind::kSecret;
    // A secret is given as <name>_file: that is the key configure_sink takes.
    keys.push_back(secret ? std::string(spec.name) + "_file" : std::string(spec.name));
    kinds.push_back(spec.kind == OptionKind::kInteger       ? "integer"
                    : spec.kind == OptionKind::kBoolean     ? "boolean"
                    : spec.kind == OptionKind::kFile        ? "file"
                    : secret                                ? "secret"
                    : spec.kind == OptionKind::kPrivateFile ? "private file"
                                                            : "text");
  }
  outbox::pg::guard([&] {
    InitMaterializedSRF(fcinfo, 0);
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    for (std::size_t i = 0; i < table.count; ++i) {
      const char* description = table.specs[i].description;
      Datum values[3] = {CStringGetTextDatum(keys[i].c_str()), CStringGetTextDatum(kinds[i]),
                         CStringGetTextDatum(description != nullptr ? description : "")};
      bool nulls[3] = {};
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
  });
  return (Datum)0;
}

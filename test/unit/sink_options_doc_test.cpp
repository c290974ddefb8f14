// docs/sink-options.md against the built-in sinks' declarations: every declared option has a
// row of its kind in its sink's table, and every row is declared. So the reference stays true
// when an option is added, removed or changes kind.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "sinks/http/http_options.hpp"
#include "sinks/kafka/kafka_options.hpp"
#include "sinks/nats/nats_options.hpp"
#include "sinks/null/null_sink.hpp"
#include "sinks/common/option_rules.hpp"

#ifndef OUTBOX_SOURCE_DIR
#error "OUTBOX_SOURCE_DIR must name the source tree (for docs/sink-options.md)"
#endif

namespace {

using namespace outbox::sinks;

std::string read_doc() {
  std::ifstream in(std::string(OUTBOX_SOURCE_DIR) + "/docs/sink-options.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The rows of the table in section "## The `<sink>` sink": first cell (without backquotes)
// -> second cell (the kind).
std::map<std::string, std::string> rows_of(const std::string& doc, const std::string& sink) {
  std::map<std::string, std::string> rows;
  const std::string heading = "## The `" + sink + "` sink\n";
  std::size_t at = doc.find(heading);
  if (at == std::string::npos) return rows;
  const std::size_t end = doc.find("\n## ", at + heading.size());
  std::istringstream section(doc.substr(at, end == std::string::npos ? end : end - at));
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::size_t name_end = line.find("` |", 3);
    const std::size_t kind_end = line.find(" |", name_end + 3);
    if (name_end == std::string::npos || kind_end == std::string::npos) continue;
    rows[line.substr(3, name_end - 3)] = line.substr(name_end + 4, kind_end - name_end - 4);
  }
  return rows;
}

const char* kind_word(OptionKind kind) {
  switch (kind) {
    case OptionKind::kText:
      return "text";
    case OptionKind::kInteger:
      return "integer";
    case OptionKind::kBoolean:
      return "boolean";
    case OptionKind::kFile:
      return "file";
    case OptionKind::kPrivateFile:
      return "private file";
    case OptionKind::kSecret:
      return "secret";
  }
  return "?";
}

void expect_documented(const std::string& sink, const OptionSpec* specs, std::size_t count) {
  const std::string doc = read_doc();
  ASSERT_FALSE(doc.empty()) << "docs/sink-options.md not found";
  std::map<std::string, std::string> rows = rows_of(doc, sink);
  ASSERT_FALSE(rows.empty()) << "no table under \"## The `" << sink << "` sink\"";
  for (std::size_t i = 0; i < count; ++i) {
    // What the user gives: a secret by its file.
    std::string name = specs[i].name;
    if (specs[i].kind == OptionKind::kSecret) name += kSecretFileSuffix;
    auto row = rows.find(name);
    if (row == rows.end()) {
      ADD_FAILURE() << sink << " option " << name << " is missing from docs/sink-options.md";
      continue;
    }
    EXPECT_EQ(row->second, kind_word(specs[i].kind)) << sink << " option " << name;
    rows.erase(row);
  }
  for (const auto& [name, kind] : rows) {
    ADD_FAILURE() << "docs/sink-options.md lists " << sink << " option " << name
                  << ", which the sink does not declare";
  }
}

TEST(SinkOptionsDoc, Kafka) { expect_documented("kafka", kKafkaOptions, kKafkaOptionCount); }

TEST(SinkOptionsDoc, Http) { expect_documented("http", kHttpOptions, kHttpOptionCount); }

TEST(SinkOptionsDoc, Nats) { expect_documented("nats", kNatsOptions, kNatsOptionCount); }

TEST(SinkOptionsDoc, Null) { expect_documented("null", kNullOptions, kNullOptionCount); }

}  // namespace

// The sinks' bounded log buffer (sinks/common/log_buffer.hpp): lines kept up to the bound,
// the rest counted in one line, the count reset by each take, and no line lost or doubled
// when several threads log at once.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "sinks/common/log_buffer.hpp"

namespace {

using outbox::sinks::LogBuffer;
using outbox::sinks::LogLine;

TEST(LogBuffer, KeepsLinesInOrder) {
  LogBuffer log("lib");
  log.add(3, "one");
  log.add(6, "two");
  const std::vector<LogLine> lines = log.take();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].level, 3);
  EXPECT_EQ(lines[0].text, "one");
  EXPECT_EQ(lines[1].level, 6);
  EXPECT_EQ(lines[1].text, "two");
  EXPECT_TRUE(log.take().empty());
}

TEST(LogBuffer, CountsWhatIsPastTheBound) {
  LogBuffer log("lib", 3);
  for (int i = 0; i < 10; ++i) log.add(6, "line " + std::to_string(i));
  std::vector<LogLine> lines = log.take();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2].text, "line 2");
  EXPECT_EQ(lines[3].level, 4);
  EXPECT_EQ(lines[3].text, "lib: 7 more log lines were dropped");

  // The count starts again after a take, and so does the room.
  log.add(6, "a");
  lines = log.take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].text, "a");
  for (int i = 0; i < 4; ++i) log.add(6, "b");
  lines = log.take();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines.back().text, "lib: 1 more log lines were dropped");
}

TEST(LogBuffer, DefaultBound) {
  LogBuffer log("lib");
  for (std::size_t i = 0; i < LogBuffer::kDefaultMaxLines; ++i) log.add(6, "x");
  EXPECT_EQ(log.take().size(), LogBuffer::kDefaultMaxLines);  // nothing dropped
}

// Lines added from several threads while another takes: each line is either taken once or
// counted as dropped once.
TEST(LogBuffer, ConcurrentAddsAndTakes) {
  constexpr int kThreads = 4;
  constexpr int kLines = 2000;
  LogBuffer log("lib", 50);
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&log] {
      for (int i = 0; i < kLines; ++i) log.add(6, "x");
    });
  }
  std::size_t kept = 0, dropped = 0;
  auto count = [&](const std::vector<LogLine>& lines) {
    for (const LogLine& line : lines) {
      if (line.text == "x") {
        ++kept;
      } else {
        const std::string prefix = "lib: ";
        ASSERT_EQ(line.text.rfind(prefix, 0), 0u) << line.text;
        dropped += std::stoul(line.text.substr(prefix.size()));
      }
    }
  };
  for (int i = 0; i < 200; ++i) count(log.take());
  for (std::thread& w : writers) w.join();
  count(log.take());
  EXPECT_EQ(kept + dropped, static_cast<std::size_t>(kThreads * kLines));
}

}  // namespace

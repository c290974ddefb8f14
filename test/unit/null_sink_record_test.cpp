// The null sink's record_file: the log of what it acknowledged, as an independent consumer
// would see it. Only acked messages, in batch order, a batch's lines in one write.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "null_test_support.hpp"
#include "sinks/null/null_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;

// A file of its own in the temporary directory, removed at the end.
class TempFile {
 public:
  explicit TempFile(const std::string& content = "") {
    const char* dir = std::getenv("TMPDIR");
    std::string name =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/outbox-null-record-XXXXXX";
    const int fd = mkstemp(name.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    close(fd);
    path_ = name;
    std::ofstream(path_) << content;
    chmod(path_.c_str(), 0644);  // mkstemp's 0600 is refused (NullSinkRecord.PrivateFileIsRefused)
  }
  ~TempFile() { unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  std::string content() const {
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
};

std::string line(const Message& m) {
  return std::string(m.aggregatetype) + "\t" + std::string(m.aggregateid) + "\t" +
         std::string(m.id) + "\t" + std::string(m.type) + "\n";
}

TEST(NullSinkRecord, AckedMessagesInOrderAppended) {
  TempFile file("written before\n");
  auto sink = create_null_sink(
      {{"record_file", file.path()}, {"reject_aggregateid", "K"}, {"fail_every", "100"}});
  EXPECT_EQ(sink->describe(),
            "null fail_every=100 reject_aggregateid=K reject_times=1 record_file=" + file.path());

  Batch b1;
  b1.add("A").add("K").add("B", "", "order", "OrderPaid").add("K");
  EXPECT_EQ(summary(send(*sink, b1)), "ARAD");
  Batch b2;
  b2.add("K", b1.id(1)).add("K", b1.id(3)).add("C", "", "customer");
  std::vector<Outcome> o2;
  sink->start(b2.messages(), o2, 1s);
  EXPECT_EQ(summary(o2), "AAA");
  sink->finish();
  const Batch b3{"K"};
  EXPECT_EQ(summary(send(*sink, b3)), "A");
  EXPECT_EQ(summary(send(*sink, Batch{})), "");  // nothing to write

  const auto& m1 = b1.messages();
  const auto& m2 = b2.messages();
  EXPECT_EQ(file.content(), "written before\n" + line(m1[0]) + line(m1[2]) + line(m2[0]) +
                                line(m2[1]) + line(m2[2]) + line(b3.messages()[0]));
  EXPECT_NE(file.content().find("order\tB\t" + b1.id(2) + "\tOrderPaid\n"), std::string::npos);
}

// Several sinks (relay workers) append to one file at once: each batch's lines stay together.
TEST(NullSinkRecord, ConcurrentWritersKeepBatchesWhole) {
  TempFile file;
  constexpr int kWriters = 3, kBatches = 200, kPerBatch = 20;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&file, w] {
      auto sink = create_null_sink({{"record_file", file.path()}});
      for (int b = 0; b < kBatches; ++b) {
        Batch batch;
        const std::string prefix = "w" + std::to_string(w) + "b" + std::to_string(b) + "m";
        for (int i = 0; i < kPerBatch; ++i)
          batch.add(std::to_string(i), prefix + std::to_string(i));
        send(*sink, batch);
      }
    });
  }
  for (auto& t : writers) t.join();

  std::istringstream lines(file.content());
  std::vector<std::string> ids;
  for (std::string l; std::getline(lines, l);) ids.push_back(l.substr(l.find('\t', 6) + 1));
  ASSERT_EQ(ids.size(), std::size_t{kWriters * kBatches * kPerBatch});
  std::map<std::string, int> batches_seen;
  for (std::size_t at = 0; at < ids.size(); at += kPerBatch) {
    const std::string batch = ids[at].substr(0, ids[at].find('m'));
    ++batches_seen[batch];
    for (int i = 0; i < kPerBatch; ++i) {
      ASSERT_EQ(ids[at + i], batch + "m" + std::to_string(i) + "\tT") << "line " << at + i;
    }
  }
  EXPECT_EQ(batches_seen.size(), std::size_t{kWriters * kBatches});
}

// A failed write: nothing of the batch counts as delivered, and its keys hold back the
// next started batch like a rejection.
TEST(NullSinkRecord, FailedWriteMakesAcksUnavailable) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  auto sink = create_null_sink({{"record_file", "/dev/full"}, {"reject_aggregateid", "K"}});
  Batch b1;
  b1.add("A").add("K").add("B");
  std::vector<Outcome> o1, o2;
  sink->start(b1.messages(), o1, 1s);
  EXPECT_EQ(summary(o1), "URU");
  EXPECT_EQ(o1[0].error, "the null sink cannot write its record_file: No space left on device");
  const Batch b2{"A", "C"};
  sink->start(b2.messages(), o2, 1s);
  EXPECT_EQ(summary(o2), "DU");
  sink->finish();
  sink->finish();

  // A batch with nothing acked writes nothing, so nothing fails.
  auto rejecting = create_null_sink({{"record_file", "/dev/full"}, {"fail_every", "1"}});
  EXPECT_EQ(summary(send(*rejecting, Batch{"A", "A", "B"})), "RDR");
}

// A file that gives other users no permission may be a secret or a private key (those must
// be such files): the sink does not append to it, so that a role allowed to call
// configure_sink cannot corrupt one. Any permission for others makes it acceptable.
TEST(NullSinkRecord, PrivateFileIsRefused) {
  TempFile file("secret\n");
  for (mode_t mode : {0600, 0640, 0660, 0200}) {
    ASSERT_EQ(chmod(file.path().c_str(), mode), 0);
    try {
      create_null_sink({{"record_file", file.path()}});
      ADD_FAILURE() << std::oct << mode << ": accepted";
    } catch (const ConfigError& e) {
      char shown[8];
      std::snprintf(shown, sizeof shown, "%04o", static_cast<unsigned>(mode));
      const std::string what = e.what();
      EXPECT_EQ(what, "null sink: record_file \"" + file.path() +
                          "\" gives other users no permission (mode " + shown +
                          "), as a secret file or a private key must: the null sink appends "
                          "only to a file that other users may read (chmod o+r, e.g. 644), so "
                          "that configure_sink cannot make it write into a secret or a key");
    }
  }
  EXPECT_EQ(file.content(), "secret\n");
  for (mode_t mode : {0644, 0604, 0602, 0666}) {
    ASSERT_EQ(chmod(file.path().c_str(), mode), 0);
    EXPECT_NO_THROW(create_null_sink({{"record_file", file.path()}})) << std::oct << mode;
  }
  // A symbolic link is not followed (configure_sink hands over the resolved path).
  const std::string link = file.path() + ".link";
  ASSERT_EQ(symlink(file.path().c_str(), link.c_str()), 0);
  EXPECT_THROW(create_null_sink({{"record_file", link}}), ConfigError);
  unlink(link.c_str());
}

TEST(NullSinkRecord, FileThatCannotBeOpenedIsAConfigError) {
  for (const std::string& path : {std::string("/nonexistent/outbox-record"), std::string("/")}) {
    try {
      create_null_sink({{"record_file", path}});
      ADD_FAILURE() << path << ": no ConfigError";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("null sink: record_file \"" + path + "\" cannot be opened: ", 0), 0u)
          << what;
    }
  }
  try {
    create_null_sink({{"record_file", "/nonexistent/outbox-record"}});
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos);
  }
  EXPECT_THROW(create_null_sink({{"record_file", ""}}), ConfigError);
}

}  // namespace

// The option rules (src/sinks/common/option_rules.hpp) against a temporary directory of files:
// declared options only, integers and booleans, files inside the directory only (.., absolute
// paths, symbolic links), secrets from files with safe permissions, and no secret in any
// message.
#include "sinks/common/option_rules.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace outbox::sinks;

const OptionSpec kSpecs[] = {
    {"host", OptionKind::kText, "a host"},
    {"batch", OptionKind::kInteger, "a number"},
    {"token.count", OptionKind::kInteger, "a number with a sensitive-looking name"},
    {"fast", OptionKind::kBoolean, "a flag"},
    {"ca.location", OptionKind::kFile, "a file"},
    {"password", OptionKind::kSecret, "a secret"},
    {"key.location", OptionKind::kPrivateFile, "a private key"},
};
const OptionTable kTable{kSpecs, std::size(kSpecs)};
constexpr const char* kSecretValue = "hunter2-correct-horse";

// A temporary directory with files; removed afterwards.
class OptionRules : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outbox-option-rules-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ + "/files";
    ASSERT_EQ(mkdir(dir_.c_str(), 0750), 0);
    ASSERT_EQ(mkdir((dir_ + "/kafka").c_str(), 0750), 0);
    write(dir_ + "/kafka/ca.pem", "CA", 0644);
    write(dir_ + "/kafka/relay.password", std::string(kSecretValue) + "\n", 0600);
    write(base_ + "/outside.pem", "OUT", 0644);
    write(base_ + "/outside.password", kSecretValue, 0600);
  }
  void TearDown() override {
    const std::string command = "rm -rf '" + base_ + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }

  static void write(const std::string& path, const std::string& content, mode_t mode) {
    std::ofstream(path, std::ios::binary) << content;
    ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
  }

  // The refusal of `given` (its message and hint), or "" when accepted.
  std::string refusal(const Options& given, const std::string& directory) {
    try {
      resolve_options("kafka", kTable, given, directory);
    } catch (const OptionError& e) {
      last_hint_ = e.hint();
      const std::string text = std::string(e.what()) + " | " + e.hint();
      EXPECT_EQ(text.find(kSecretValue), std::string::npos) << text;
      return e.what();
    }
    return "";
  }
  std::string refusal(const Options& given) { return refusal(given, dir_); }

  Options resolved(const Options& given) { return resolve_options("kafka", kTable, given, dir_); }

  std::string base_;
  std::string dir_;
  std::string last_hint_;
};

TEST_F(OptionRules, UndeclaredOptionIsRefusedWithAHint) {
  EXPECT_EQ(refusal({{"host", "b:9092"}, {"plugin.library.paths", "/tmp/evil.so"}}),
            "sink \"kafka\" has no option \"plugin.library.paths\"");
  EXPECT_NE(last_hint_.find("docs/sink-options.md"), std::string::npos) << last_hint_;
  // A "_file" on a file option, or on a plain one: the hint says what to give instead.
  EXPECT_EQ(refusal({{"ca.location_file", "kafka/ca.pem"}}),
            "sink \"kafka\" has no option \"ca.location_file\"");
  EXPECT_EQ(last_hint_, "Option \"ca.location\" names a file itself: give \"ca.location\".");
  EXPECT_EQ(refusal({{"host_file", "x"}}), "sink \"kafka\" has no option \"host_file\"");
  EXPECT_NE(last_hint_.find("is not a secret"), std::string::npos) << last_hint_;
  // The sink's own check.
  try {
    check_declared("kafka", kTable, {{"sasl.kerberos.kinit.cmd", "touch /tmp/x"}});
    FAIL();
  } catch (const OptionError& e) {
    EXPECT_STREQ(e.what(), "sink \"kafka\" has no option \"sasl.kerberos.kinit.cmd\"");
  }
  // Empty declarations refuse everything.
  EXPECT_THROW(resolve_options("x", OptionTable{}, {{"host", "h"}}, dir_), OptionError);
  EXPECT_TRUE(resolve_options("x", OptionTable{}, {}, "").empty());
}

TEST_F(OptionRules, IntegersAndBooleans) {
  for (const char* good : {"0", "5", "-1", "123456789012345678"}) {
    EXPECT_EQ(refusal({{"batch", good}}), "") << good;
  }
  for (const char* bad : {"", "-", "5.0", "1e3", " 5", "5 ", "+5", "0x10", "1234567890123456789"}) {
    EXPECT_EQ(
        refusal({{"batch", bad}}),
        std::string("sink \"kafka\": option \"batch\" must be a whole number (\"") + bad + "\")")
        << bad;
  }
  EXPECT_EQ(refusal({{"fast", "true"}, {"fast", "false"}}), "");
  for (const char* bad : {"yes", "1", "TRUE", "t", ""}) {
    EXPECT_EQ(
        refusal({{"fast", bad}}),
        std::string("sink \"kafka\": option \"fast\" must be true or false (\"") + bad + "\")")
        << bad;
  }
  // A sensitive-looking name: the value is not repeated.
  EXPECT_EQ(refusal({{"token.count", "s3cr3t"}}),
            "sink \"kafka\": option \"token.count\" must be a whole number");
  EXPECT_THROW(check_declared("kafka", kTable, {{"batch", "many"}}), OptionError);
  EXPECT_NO_THROW(check_declared("kafka", kTable, {{"batch", "7"}, {"password", "x"}}));
  // Text passes as given, in order.
  const Options out = resolved({{"host", " any thing "}, {"batch", "3"}});
  EXPECT_EQ(out, (Options{{"host", " any thing "}, {"batch", "3"}}));
}

TEST_F(OptionRules, InlineSecretIsRefusedWithoutEcho) {
  EXPECT_EQ(refusal({{"password", kSecretValue}}),
            "sink \"kafka\": option \"password\" is a secret and is never taken inline");
  EXPECT_NE(last_hint_.find("\"password_file\""), std::string::npos) << last_hint_;
  EXPECT_NE(last_hint_.find("outbox.sink_files_directory"), std::string::npos) << last_hint_;
  // Also without a directory, and from the sink's own check nothing leaks either.
  EXPECT_EQ(refusal({{"password", kSecretValue}}, ""),
            "sink \"kafka\": option \"password\" is a secret and is never taken inline");
}

TEST_F(OptionRules, NoDirectoryRefusesFilesAndSecrets) {
  EXPECT_EQ(refusal({{"ca.location", "kafka/ca.pem"}}, ""),
            "sink \"kafka\": option \"ca.location\" names a file, but "
            "outbox.sink_files_directory is not set");
  EXPECT_NE(last_hint_.find("outbox.sink_files_directory"), std::string::npos);
  EXPECT_EQ(refusal({{"password_file", "kafka/relay.password"}}, ""),
            "sink \"kafka\": option \"password_file\" names a file, but "
            "outbox.sink_files_directory is not set");
  EXPECT_NE(refusal({{"ca.location", "kafka/ca.pem"}}, base_ + "/missing").find("cannot be used"),
            std::string::npos);
  EXPECT_NE(
      refusal({{"ca.location", "kafka/ca.pem"}}, base_ + "/outside.pem").find("is not a directory"),
      std::string::npos);
  // Anyone could plant files in a world-writable directory.
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_EQ(refusal({{"ca.location", "kafka/ca.pem"}}),
            "outbox.sink_files_directory \"" + dir_ +
                "\" is writable by every user of the machine (mode 0777)");
  ASSERT_EQ(chmod(dir_.c_str(), 0750), 0);
}

// Every directory from outbox.sink_files_directory down to the file, symbolic links resolved,
// must be one that no other user can change: not writable by its group or by everyone. The
// message names the directory.
TEST_F(OptionRules, EveryDirectoryOnThePathIsChecked) {
  ASSERT_EQ(mkdir((dir_ + "/kafka/sub").c_str(), 0750), 0);
  write(dir_ + "/kafka/sub/ca.pem", "CA", 0644);
  write(dir_ + "/kafka/sub/relay.password", kSecretValue, 0600);
  write(dir_ + "/kafka/sub/client.key", "KEY", 0600);
  EXPECT_EQ(refusal({{"ca.location", "kafka/sub/ca.pem"}}), "");
  const std::string kafka = dir_ + "/kafka";
  for (const auto& [directory, mode, problem] :
       {std::tuple{kafka, 0777, "writable by every user of the machine (mode 0777)"},
        std::tuple{kafka, 01777, "writable by every user of the machine (mode 1777)"},
        std::tuple{kafka, 0770, "writable by its group (mode 0770)"},
        std::tuple{kafka + "/sub", 0752, "writable by every user of the machine (mode 0752)"},
        std::tuple{kafka + "/sub", 0730, "writable by its group (mode 0730)"}}) {
    ASSERT_EQ(chmod(directory.c_str(), static_cast<mode_t>(mode)), 0);
    const std::string about_dir =
        "the directory \"" + directory + "\" inside outbox.sink_files_directory is " + problem;
    EXPECT_EQ(refusal({{"ca.location", "kafka/sub/ca.pem"}}),
              "sink \"kafka\": option \"ca.location\": " + about_dir);
    EXPECT_NE(last_hint_.find("chmod go-w"), std::string::npos) << last_hint_;
    EXPECT_EQ(refusal({{"ca.location", dir_ + "/kafka/sub/ca.pem"}}),
              "sink \"kafka\": option \"ca.location\": " + about_dir);
    EXPECT_EQ(refusal({{"password_file", "kafka/sub/relay.password"}}),
              "sink \"kafka\": option \"password_file\": " + about_dir);
    EXPECT_EQ(refusal({{"key.location", "kafka/sub/client.key"}}),
              "sink \"kafka\": option \"key.location\": " + about_dir);
    ASSERT_EQ(chmod(directory.c_str(), 0750), 0);
  }
  // Group-readable and searchable is fine.
  ASSERT_EQ(chmod(kafka.c_str(), 0755), 0);
  EXPECT_EQ(refusal({{"ca.location", "kafka/sub/ca.pem"}}), "");
  // The top directory follows the same rule.
  ASSERT_EQ(chmod(dir_.c_str(), 0770), 0);
  EXPECT_EQ(refusal({{"ca.location", "kafka/ca.pem"}}),
            "outbox.sink_files_directory \"" + dir_ + "\" is writable by its group (mode 0770)");
  ASSERT_EQ(chmod(dir_.c_str(), 0750), 0);

  // Through a symbolic link: the directory it leads to is checked, and so is the one holding
  // the link.
  ASSERT_EQ(mkdir((dir_ + "/open").c_str(), 0777), 0);
  ASSERT_EQ(chmod((dir_ + "/open").c_str(), 0777), 0);
  ASSERT_EQ(symlink("../open", (dir_ + "/kafka/shared").c_str()), 0);
  write(dir_ + "/open/ca.pem", "CA", 0644);
  EXPECT_EQ(refusal({{"ca.location", "kafka/shared/ca.pem"}}),
            "sink \"kafka\": option \"ca.location\": the directory \"" + dir_ +
                "/open\" inside outbox.sink_files_directory is writable by every user of the "
                "machine (mode 0777)");
  ASSERT_EQ(symlink("../kafka/sub/ca.pem", (dir_ + "/open/link.pem").c_str()), 0);
  EXPECT_NE(refusal({{"ca.location", "open/link.pem"}}).find("\"" + dir_ + "/open\""),
            std::string::npos);
  ASSERT_EQ(chmod((dir_ + "/open").c_str(), 0750), 0);
  EXPECT_EQ(resolved({{"ca.location", "kafka/shared/ca.pem"}})[0].second, dir_ + "/open/ca.pem");
  EXPECT_EQ(resolved({{"ca.location", "open/link.pem"}})[0].second, dir_ + "/kafka/sub/ca.pem");

  // Out of the directory and back in: refused, whatever the directory outside is like.
  ASSERT_EQ(symlink(base_.c_str(), (dir_ + "/up").c_str()), 0);
  EXPECT_EQ(refusal({{"ca.location", "up/files/kafka/ca.pem"}}),
            "sink \"kafka\": option \"ca.location\" names a file through a directory outside "
            "outbox.sink_files_directory (a symbolic link) (\"up/files/kafka/ca.pem\")");
}

// A directory owned by another user (not the server's, not root): that user could swap files.
TEST_F(OptionRules, DirectoryOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  ASSERT_EQ(chown((dir_ + "/kafka").c_str(), 12345, 0), 0);
  EXPECT_EQ(refusal({{"ca.location", "kafka/ca.pem"}}),
            "sink \"kafka\": option \"ca.location\": the directory \"" + dir_ +
                "/kafka\" inside outbox.sink_files_directory is owned by a user (uid 12345) "
                "other than the server's operating system user or root (mode 0750)");
  ASSERT_EQ(chown((dir_ + "/kafka").c_str(), 0, 0), 0);
  EXPECT_EQ(refusal({{"ca.location", "kafka/ca.pem"}}), "");
  ASSERT_EQ(chown(dir_.c_str(), 12345, 0), 0);
  EXPECT_NE(refusal({{"ca.location", "kafka/ca.pem"}}).find("is owned by a user (uid 12345)"),
            std::string::npos);
  ASSERT_EQ(chown(dir_.c_str(), 0, 0), 0);
}

// A plain file option: the file itself must not be writable by every user.
TEST_F(OptionRules, FileWritableByEveryoneIsRefused) {
  write(dir_ + "/kafka/open.pem", "CA", 0666);
  EXPECT_EQ(refusal({{"ca.location", "kafka/open.pem"}}),
            "sink \"kafka\": option \"ca.location\": the file is writable by every user of "
            "the machine (mode 0666) (\"kafka/open.pem\")");
  EXPECT_NE(last_hint_.find("chmod o-w"), std::string::npos);
  write(dir_ + "/kafka/group.pem", "CA", 0664);
  EXPECT_EQ(refusal({{"ca.location", "kafka/group.pem"}}), "");
}

TEST_F(OptionRules, FilesResolveInsideTheDirectory) {
  const std::string ca = dir_ + "/kafka/ca.pem";
  EXPECT_EQ(resolved({{"ca.location", "kafka/ca.pem"}}), (Options{{"ca.location", ca}}));
  EXPECT_EQ(resolved({{"ca.location", "./kafka//x/../ca.pem"}})[0].second, ca);
  EXPECT_EQ(resolved({{"ca.location", ca}})[0].second, ca);  // absolute, inside
  // The directory named through a symbolic link, and a file through a link inside it.
  ASSERT_EQ(symlink(dir_.c_str(), (base_ + "/link").c_str()), 0);
  EXPECT_EQ(resolve_options("kafka", kTable, {{"ca.location", "kafka/ca.pem"}}, base_ + "/link")[0]
                .second,
            ca);
  EXPECT_EQ(resolve_options("kafka", kTable, {{"ca.location", base_ + "/link/kafka/ca.pem"}},
                            base_ + "/link")[0]
                .second,
            ca);
  ASSERT_EQ(symlink("ca.pem", (dir_ + "/kafka/current.pem").c_str()), 0);
  EXPECT_EQ(resolved({{"ca.location", "kafka/current.pem"}})[0].second, ca);
}

TEST_F(OptionRules, FilesOutsideTheDirectoryAreRefused) {
  const std::string outside =
      "sink \"kafka\": option \"ca.location\" names a file outside "
      "outbox.sink_files_directory";
  EXPECT_EQ(refusal({{"ca.location", "../outside.pem"}}), outside + " (\"../outside.pem\")");
  EXPECT_EQ(refusal({{"ca.location", "kafka/../../outside.pem"}}),
            outside + " (\"kafka/../../outside.pem\")");
  EXPECT_EQ(refusal({{"ca.location", "/etc/passwd"}}), outside + " (\"/etc/passwd\")");
  EXPECT_EQ(refusal({{"ca.location", base_ + "/outside.pem"}}),
            outside + " (\"" + base_ + "/outside.pem\")");
  EXPECT_EQ(refusal({{"ca.location", dir_ + "/../outside.pem"}}),
            outside + " (\"" + dir_ + "/../outside.pem\")");
  EXPECT_EQ(refusal({{"ca.location", dir_ + "x/a.pem"}}), outside + " (\"" + dir_ + "x/a.pem\")");
  EXPECT_EQ(refusal({{"ca.location", "."}}), outside + " (\".\")");
  EXPECT_EQ(refusal({{"ca.location", ""}}),
            "sink \"kafka\": option \"ca.location\" must name a file");
  EXPECT_NE(last_hint_.find("relative to outbox.sink_files_directory"), std::string::npos);

  // Symbolic links inside that lead out, to a file or to a directory.
  ASSERT_EQ(symlink((base_ + "/outside.pem").c_str(), (dir_ + "/escape.pem").c_str()), 0);
  ASSERT_EQ(symlink(base_.c_str(), (dir_ + "/up").c_str()), 0);
  const std::string via_link =
      "sink \"kafka\": option \"ca.location\" names a file that resolves (through a symbolic "
      "link) to outside outbox.sink_files_directory";
  EXPECT_EQ(refusal({{"ca.location", "escape.pem"}}), via_link + " (\"escape.pem\")");
  EXPECT_EQ(refusal({{"ca.location", "up/outside.pem"}}), via_link + " (\"up/outside.pem\")");
  EXPECT_EQ(refusal({{"password_file", "up/outside.password"}}),
            "sink \"kafka\": option \"password_file\" names a file that resolves (through a "
            "symbolic link) to outside outbox.sink_files_directory");

  EXPECT_EQ(refusal({{"ca.location", "kafka"}}),
            "sink \"kafka\": option \"ca.location\" does not name a regular file (\"kafka\")");
  EXPECT_EQ(refusal({{"ca.location", "kafka/none.pem"}}),
            "sink \"kafka\": option \"ca.location\": no such file in outbox.sink_files_directory "
            "(\"kafka/none.pem\")");
  EXPECT_EQ(refusal({{"ca.location", "kafka/ca.pem/x"}}),
            "sink \"kafka\": option \"ca.location\": no such file in outbox.sink_files_directory "
            "(\"kafka/ca.pem/x\")");
  // A path is shown whole, however long; its control bytes escaped.
  const std::string deep = "kafka/" + std::string(120, 'd') + "/ca\n.pem";
  EXPECT_EQ(refusal({{"ca.location", deep}}),
            "sink \"kafka\": option \"ca.location\": no such file in outbox.sink_files_directory "
            "(\"kafka/" +
                std::string(120, 'd') + "/ca\\x0a.pem\")");
  ASSERT_EQ(symlink("nowhere.pem", (dir_ + "/dangling.pem").c_str()), 0);
  EXPECT_NE(refusal({{"ca.location", "dangling.pem"}}).find("no such file"), std::string::npos);
}

TEST_F(OptionRules, SecretsComeFromFiles) {
  // One trailing newline is stripped, no more.
  EXPECT_EQ(resolved({{"password_file", "kafka/relay.password"}}),
            (Options{{"password", kSecretValue}}));
  write(dir_ + "/two", "a b\n\n", 0640);
  EXPECT_EQ(resolved({{"password_file", "two"}})[0].second, "a b\n");
  write(dir_ + "/crlf", "pw\r\n", 0400);
  EXPECT_EQ(resolved({{"password_file", "crlf"}})[0].second, "pw");
  write(dir_ + "/bare", "pw\r", 0600);
  EXPECT_EQ(resolved({{"password_file", "bare"}})[0].second, "pw\r");
  write(dir_ + "/multi", "-----BEGIN-----\nabc\n-----END-----\n", 0600);
  EXPECT_EQ(resolved({{"password_file", "multi"}})[0].second,
            "-----BEGIN-----\nabc\n-----END-----");
  // The largest allowed, and one byte more.
  write(dir_ + "/big", std::string(kMaxSecretBytes, 'x'), 0600);
  EXPECT_EQ(resolved({{"password_file", "big"}})[0].second.size(), kMaxSecretBytes);
  write(dir_ + "/bigger", std::string(kMaxSecretBytes + 1, 'x'), 0600);
  EXPECT_EQ(refusal({{"password_file", "bigger"}}),
            "sink \"kafka\": option \"password_file\": the secret file is larger than 64 KiB");
}

// A private file (a key, a credentials file) is given by path, like a file, and must be as
// private as a secret file.
TEST_F(OptionRules, PrivateFilesMustBePrivate) {
  write(dir_ + "/kafka/client.key", "KEY", 0600);
  EXPECT_EQ(resolved({{"key.location", "kafka/client.key"}}),
            (Options{{"key.location", dir_ + "/kafka/client.key"}}));
  for (mode_t mode : {0604, 0644}) {
    write(dir_ + "/kafka/open.key", "KEY", mode);
    const std::string e = refusal({{"key.location", "kafka/open.key"}});
    EXPECT_NE(e.find("the private file is readable or writable by other users (mode 0"),
              std::string::npos)
        << e;
    EXPECT_NE(last_hint_.find("chmod 600 (or 640)"), std::string::npos) << last_hint_;
  }
  EXPECT_NE(refusal({{"key.location", "../outside.pem"}}).find("outside"), std::string::npos);
}

TEST_F(OptionRules, SecretFilesMustBePrivate) {
  for (mode_t mode : {0604, 0602, 0601, 0644, 0666}) {
    write(dir_ + "/open.password", kSecretValue, mode);
    const std::string e = refusal({{"password_file", "open.password"}});
    EXPECT_NE(e.find("the secret file is readable or writable by other users (mode 0"),
              std::string::npos)
        << e;
    EXPECT_NE(last_hint_.find("chmod 600 (or 640)"), std::string::npos) << last_hint_;
    EXPECT_NE(last_hint_.find("owned by the server's operating system user"), std::string::npos);
  }
  write(dir_ + "/group.password", kSecretValue, 0640);
  EXPECT_EQ(refusal({{"password_file", "group.password"}}), "");
}

TEST_F(OptionRules, BadSecretFilesAreRefusedWithoutEcho) {
  write(dir_ + "/empty", "\n", 0600);
  EXPECT_EQ(refusal({{"password_file", "empty"}}),
            "sink \"kafka\": option \"password_file\": the secret file is empty");
  write(dir_ + "/nul", std::string(kSecretValue) + std::string(1, '\0') + "x", 0600);
  EXPECT_EQ(refusal({{"password_file", "nul"}}),
            "sink \"kafka\": option \"password_file\": the secret file contains a NUL byte");
  // A sensitive-looking option name: not even the file's name is repeated.
  EXPECT_EQ(refusal({{"password_file", "kafka/none"}}),
            "sink \"kafka\": option \"password_file\": no such file in "
            "outbox.sink_files_directory");
  EXPECT_EQ(refusal({{"password_file", "kafka"}}),
            "sink \"kafka\": option \"password_file\" does not name a regular file");
  EXPECT_EQ(refusal({{"password_file", "../outside.password"}}),
            "sink \"kafka\": option \"password_file\" names a file outside "
            "outbox.sink_files_directory");
  if (geteuid() != 0) {  // root reads any file
    write(dir_ + "/unreadable", kSecretValue, 0000);
    EXPECT_NE(refusal({{"password_file", "unreadable"}}).find("the server cannot read the file"),
              std::string::npos);
  }
}

TEST(OptionRulesNames, LooksSensitive) {
  for (const char* name :
       {"sasl.password", "ssl.key.password", "ssl.key.location", "ssl.keystore.location",
        "ssl.key.pem", "ssl.ca.pem", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
        "sasl.username", "sasl.oauthbearer.token.endpoint.url", "api_token", "Password_File",
        "credentials", "sasl.jaas.config"}) {
    EXPECT_TRUE(looks_sensitive(name)) << name;
  }
  for (const char* name : {"bootstrap.servers", "linger.ms", "ssl.ca.location", "security.protocol",
                           "sasl.mechanisms", "socket.keepalive.enable", "topic.template"}) {
    EXPECT_FALSE(looks_sensitive(name)) << name;
  }
}

}  // namespace

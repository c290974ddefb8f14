// The NATS sink's options and subject template: what create() refuses, and what a rendered
// subject or a header may hold. No server needed.
#include <gtest/gtest.h>

#include <string>

#include "nats_test_support.hpp"
#include "message_support.hpp"
#include "sinks/nats/nats_options.hpp"
#include "sinks/nats/nats_subject.hpp"
#include "sinks/common/option_rules.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using outbox::sinks::nats::SubjectTemplate;

std::string template_error(const std::string& text) {
  try {
    SubjectTemplate t(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

TEST(NatsSubject, RendersEveryPlaceholder) {
  SubjectTemplate t("app.${aggregatetype}.${type}.${aggregateid}");
  EXPECT_EQ(t.render(event_message("order", "42", "Created")), "app.order.Created.42");
  EXPECT_EQ(SubjectTemplate().render(event_message("order", "1", "T")), "outbox.event.order");
}

TEST(NatsSubject, RefusesBadTemplates) {
  EXPECT_NE(template_error("").find("must not be empty"), std::string::npos);
  EXPECT_NE(template_error("a.${nope}").find("unknown placeholder ${nope}"), std::string::npos);
  EXPECT_NE(template_error("a.${type").find("unterminated"), std::string::npos);
  EXPECT_NE(template_error("a b.${type}").find("whitespace"), std::string::npos);
  EXPECT_NE(template_error("a.*.${type}").find("wildcard"), std::string::npos);
  EXPECT_NE(template_error("a.>").find("wildcard"), std::string::npos);
  EXPECT_NE(template_error("a..${type}").find("empty token"), std::string::npos);
  EXPECT_NE(template_error(".a").find("empty token"), std::string::npos);
  EXPECT_NE(template_error("${type}.").find("empty token"), std::string::npos);
  EXPECT_EQ(template_error("${aggregatetype}"), "none");
  EXPECT_EQ(template_error("events.${aggregatetype}.${aggregateid}"), "none");
}

TEST(NatsSubject, RenderedSubjectsAreCheckedNotMangled) {
  SubjectTemplate t("outbox.${aggregatetype}");
  std::string subject, error;
  EXPECT_TRUE(nats::route_subject(t, event_message("order", "1", "T"), subject, error));
  EXPECT_EQ(subject, "outbox.order");
  for (const char* bad :
       {"has space", "tab\there", "star*", "gt>", "", "trailing.", "a..b", "line\nbreak"}) {
    EXPECT_FALSE(nats::route_subject(t, event_message(bad, "1", "T"), subject, error)) << bad;
    EXPECT_NE(error.find("subject"), std::string::npos) << error;
  }
  EXPECT_TRUE(nats::route_subject(t, event_message("Zürich", "1", "T"), subject, error)) << error;
}

TEST(NatsSubject, HeadersThatWouldBreakTheFraming) {
  EXPECT_EQ(nats::header_error("tenant", "t1"), "");
  EXPECT_NE(nats::header_error("tenant", "a\r\nNats-Rollup: all"), "");
  EXPECT_NE(nats::header_error("bad name", "x"), "");
  EXPECT_NE(nats::header_error("bad:name", "x"), "");
  EXPECT_NE(nats::own_header_error("Nats-Msg-Id", false), "");
  EXPECT_NE(nats::own_header_error("nats-rollup", false), "");
  EXPECT_NE(nats::own_header_error("aggregateid", false), "");
  EXPECT_EQ(nats::own_header_error("ce-id", false), "");
  EXPECT_NE(nats::own_header_error("ce-id", true), "");
  EXPECT_NE(nats::own_header_error("Content-Type", true), "");
}

TEST(NatsOptions, RefusesBadOptions) {
  EXPECT_NE(nats_config_error({}).find("servers is required"), std::string::npos);
  EXPECT_NE(nats_config_error({{"servers", "http://x:4222"}}).find("not a nats:// or tls://"),
            std::string::npos);
  EXPECT_NE(nats_config_error({{"servers", "nats://a:1,,nats://b:2"}}).find("empty URL"),
            std::string::npos);
  const std::string inline_user = nats_config_error({{"servers", "nats://u:hunter2@a:1"}});
  EXPECT_NE(inline_user.find("user information"), std::string::npos);
  EXPECT_EQ(inline_user.find("hunter2"), std::string::npos);
  EXPECT_NE(nats_config_error({{"servers", "nats://a:1"}, {"subject.template", "a.*"}})
                .find("subject.template: "),
            std::string::npos);
  EXPECT_NE(
      nats_config_error({{"servers", "nats://a:1"}, {"max_pending", "0"}}).find("max_pending"),
      std::string::npos);
  EXPECT_NE(nats_config_error({{"servers", "nats://a:1"}, {"max_pending", "x"}}), "none");
  EXPECT_NE(nats_config_error({{"servers", "nats://a:1"}, {"user", "u"}}).find("needs password"),
            std::string::npos);
  EXPECT_NE(nats_config_error(
                {{"servers", "nats://a:1"}, {"user", "u"}, {"password", "p"}, {"token", "t"}})
                .find("one way"),
            std::string::npos);
  EXPECT_NE(nats_config_error({{"servers", "nats://a:1"}, {"stream", "a.b"}}).find("stream"),
            std::string::npos);
  EXPECT_NE(nats_config_error({{"servers", "nats://a:1"}, {"cloudevents.source", "/x"}})
                .find("cloudevents = true"),
            std::string::npos);
  EXPECT_NE(
      nats_config_error({{"servers", "nats://a:1"}, {"password_file", "x"}}).find("no option"),
      std::string::npos);
}

TEST(NatsOptions, DescribeShowsServersAndTemplateNeverSecrets) {
  const NatsSettings settings = nats_settings({{"servers", "nats://127.0.0.1:1"},
                                               {"user", "relay"},
                                               {"password", "s3cret-pw"},
                                               {"subject.template", "x.${type}"},
                                               {"stream", "OUTBOX"}});
  EXPECT_EQ(settings.description,
            "nats servers=nats://127.0.0.1:1 subject.template=x.${type} stream=OUTBOX");
  EXPECT_EQ(settings.description.find("s3cret"), std::string::npos);
}

TEST(NatsOptions, EveryOptionHasAKindAndADescription) {
  for (std::size_t i = 0; i < kNatsOptionCount; ++i) {
    EXPECT_NE(std::string(kNatsOptions[i].description), "") << kNatsOptions[i].name;
  }
  const OptionTable table{kNatsOptions, kNatsOptionCount};
  EXPECT_EQ(table.find("password")->kind, OptionKind::kSecret);
  EXPECT_EQ(table.find("token")->kind, OptionKind::kSecret);
  EXPECT_EQ(table.find("creds")->kind, OptionKind::kPrivateFile);
  EXPECT_EQ(table.find("tls.ca_file")->kind, OptionKind::kFile);
  EXPECT_EQ(table.find("max_pending")->kind, OptionKind::kInteger);
  EXPECT_EQ(table.find("cloudevents")->kind, OptionKind::kBoolean);
}

}  // namespace

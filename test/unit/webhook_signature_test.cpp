// Standard Webhooks signatures: the spec's published test vector, several secrets, and the
// refusals of a bad secret (which never repeat it).
#include <gtest/gtest.h>

#include "sinks/common/sink.hpp"
#include "sinks/http/webhook_signature.hpp"

namespace {

using namespace outbox::sinks;

// From the Standard Webhooks specification (and the reference libraries' tests).
constexpr const char* kSpecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kSpecId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr const char* kSpecTimestamp = "1614265330";
constexpr const char* kSpecBody = "{\"test\": 2432232314}";
constexpr const char* kSpecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

TEST(WebhookSignature, SpecTestVector) {
  const auto keys = webhook::parse_secrets(kSpecSecret);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(webhook::signature_header(keys, kSpecId, kSpecTimestamp, kSpecBody), kSpecSignature);
}

TEST(WebhookSignature, EverySecretSignsDuringARotation) {
  const auto keys = webhook::parse_secrets(std::string(" \n") + kSpecSecret + "\n\twhsec_" +
                                           webhook::base64_encode("other key") + "\n");
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[1], "other key");
  const std::string header = webhook::signature_header(keys, kSpecId, kSpecTimestamp, kSpecBody);
  EXPECT_EQ(header, std::string(kSpecSignature) + " v1," +
                        webhook::sign("other key", kSpecId, kSpecTimestamp, kSpecBody));
}

TEST(WebhookSignature, Base64) {
  std::string out;
  for (const std::string text : {"", "a", "ab", "abc", "abcd", "\xff\x00\x10"}) {
    if (text.empty()) continue;
    ASSERT_TRUE(webhook::base64_decode(webhook::base64_encode(text), out));
    EXPECT_EQ(out, text);
  }
  EXPECT_EQ(webhook::base64_encode("ab"), "YWI=");
  EXPECT_FALSE(webhook::base64_decode("YWI", out));
  EXPECT_FALSE(webhook::base64_decode("Y=WI", out));
  EXPECT_FALSE(webhook::base64_decode("YW-_", out));
  EXPECT_FALSE(webhook::base64_decode("", out));
}

std::string error_of(const std::string& text) {
  try {
    webhook::parse_secrets(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(WebhookSignature, BadSecretsAreRefusedWithoutEchoingThem) {
  EXPECT_EQ(error_of("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            "secret: the 1st secret in the file does not start with whsec_ (Standard Webhooks "
            "secrets do)");
  EXPECT_EQ(error_of(std::string(kSpecSecret) + " whsec_not*base64!"),
            "secret: the 2nd secret in the file is not whsec_ followed by base64");
  EXPECT_EQ(error_of("whsec_"),
            "secret: the 1st secret in the file is not whsec_ followed by base64");
  EXPECT_EQ(error_of(" \n "), "secret: the file holds no whsec_ secret");
  EXPECT_EQ(error_of("hunter2hunter2").find("hunter2"), std::string::npos);
}

}  // namespace

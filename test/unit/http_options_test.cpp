// The HTTP sink's options: the URL template (placeholders, percent-encoding, refusals, no
// userinfo), the secret, the ranges, and describe().
#include <gtest/gtest.h>

#include "sinks/http/http_options.hpp"
#include "sinks/http/http_sink.hpp"
#include "sinks/common/option_rules.hpp"

namespace {

using namespace outbox::sinks;

std::string error_of(const Options& options) {
  try {
    http_settings(options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(HttpOptions, UrlTemplateRendersPercentEncodedValues) {
  const UrlTemplate t("https://hooks.example/in/${aggregatetype}/${aggregateid}?t=${type}");
  Message m;
  m.aggregatetype = "order";
  m.aggregateid = "a b/c?d&é";
  m.type = "Order.Created";
  EXPECT_EQ(t.render(m), "https://hooks.example/in/order/a%20b%2Fc%3Fd%26%C3%A9?t=Order.Created");
  EXPECT_EQ(percent_encoded("AZaz09-._~%${}"), "AZaz09-._~%25%24%7B%7D");
}

TEST(HttpOptions, UrlTemplateRefusals) {
  EXPECT_EQ(error_of({}), "http sink: url is required");
  EXPECT_EQ(error_of({{"url", "ftp://x/"}}), "url: must start with http:// or https://");
  EXPECT_EQ(error_of({{"url", "file:///etc/passwd"}}), "url: must start with http:// or https://");
  EXPECT_EQ(error_of({{"url", "http://${aggregatetype}.example/"}}),
            "url: placeholders are allowed in the path and query only, not the host");
  EXPECT_EQ(error_of({{"url", "http://x/${nope}"}}),
            "url: unknown placeholder ${nope} in \"http://x/${nope}\" (known: ${aggregatetype}, "
            "${aggregateid}, ${type})");
  EXPECT_EQ(error_of({{"url", "http://x/${type"}}),
            "url: unterminated \"${\" at position 9 in \"http://x/${type\"");
  EXPECT_EQ(error_of({{"url", "http:///path"}}), "url: has no host");
  EXPECT_EQ(error_of({{"url", "http://a b/"}}).substr(0, 22), "url: not a valid URL (");
  EXPECT_EQ(error_of({{"url", "HTTPS://x/"}}), "(accepted)");
}

TEST(HttpOptions, OtherOptions) {
  const std::string url = "http://127.0.0.1:1/";
  EXPECT_EQ(error_of({{"url", url}, {"timeout.ms", "0"}}),
            "http sink: timeout.ms must be between 1 and 600000, not 0");
  EXPECT_EQ(error_of({{"url", url}, {"max_concurrency", "1000"}}),
            "http sink: max_concurrency must be between 1 and 256, not 1000");
  EXPECT_EQ(error_of({{"url", url}, {"tls.verify", "yes"}}),
            "sink \"http\": option \"tls.verify\" must be true or false (\"yes\")");
  EXPECT_EQ(error_of({{"url", url}, {"proxy", "x"}}), "sink \"http\" has no option \"proxy\"");
  EXPECT_EQ(error_of({{"url", url}, {"cloudevents.source", "/x"}}),
            "cloudevents.source: set only with cloudevents = true");
  EXPECT_EQ(error_of({{"url", url}, {"secret", "topsecret"}}).find("topsecret"), std::string::npos);
}

// A password in the URL would be stored in clear (outbox.sink_config, pg_dump): any userinfo
// is refused, without repeating it, and the message names the secret option to use instead.
TEST(HttpOptions, UserinfoIsRefused) {
  for (const char* url :
       {"https://user:pa55word@hooks.example/in", "http://user@hooks.example/",
        "https://:pa55word@hooks.example", "http://user:pa55word@127.0.0.1:8080?x=1",
        "https://u%40x:pa55word@hooks.example/${aggregatetype}", "http://user;AUTH=x@h/",
        "HTTPS://user:pa55word@hooks.example/", "http://@hooks.example/", "http://user@/path",
        "https://a@b@hooks.example/"}) {
    const std::string e = error_of({{"url", url}});
    EXPECT_EQ(e.rfind("url: must not contain a user name or password (user:password@host)", 0), 0u)
        << url << ": " << e;
    EXPECT_NE(e.find("outbox.sink_config"), std::string::npos) << e;
    EXPECT_NE(e.find("secret_file"), std::string::npos) << e;
    EXPECT_EQ(e.find("pa55word"), std::string::npos) << e;
    EXPECT_EQ(e.find("user;"), std::string::npos) << e;
  }
  // An @ in the path or query is no userinfo.
  for (const char* url : {"https://hooks.example/in/a@b", "https://hooks.example?to=a@b",
                          "https://hooks.example#a@b", "https://hooks.example/${aggregateid}@x"}) {
    EXPECT_EQ(error_of({{"url", url}}), "(accepted)") << url;
  }
}

TEST(HttpOptions, DescribeShowsNoSecret) {
  const HttpSettings s = http_settings({{"url", "https://hooks.example/${aggregatetype}"},
                                        {"secret", "whsec_c2VjcmV0IGtleQ== whsec_b3RoZXI="},
                                        {"max_concurrency", "3"},
                                        {"tls.verify", "false"},
                                        {"cloudevents", "true"}});
  EXPECT_EQ(s.description,
            "http url=https://hooks.example/${aggregatetype} timeout.ms=10000 max_concurrency=3 "
            "straggler.timeout.ms=200 "
            "tls.verify=false signed (2 secrets) cloudevents source=/outbox");
  ASSERT_EQ(s.keys.size(), 2u);
  EXPECT_EQ(s.keys[0], "secret key");
  HttpSink sink(Options{{"url", "http://127.0.0.1:1/"}});
  EXPECT_EQ(sink.describe(),
            "http url=http://127.0.0.1:1/ timeout.ms=10000 max_concurrency=8 "
            "straggler.timeout.ms=200 unsigned");
}

// outbox.status and outbox.cluster_status show the description to monitoring roles: a token
// in the query is not theirs to read (issue 49).
TEST(HttpOptions, DescribeRedactsTheQuery) {
  const HttpSettings s =
      http_settings({{"url", "https://hooks.example/in/${type}?api_key=s3cr3t&t=${type}"}});
  EXPECT_EQ(s.description,
            "http url=https://hooks.example/in/${type}?api_key=[redacted]&t=${type} "
            "timeout.ms=10000 max_concurrency=8 straggler.timeout.ms=200 unsigned");
  EXPECT_EQ(url_redacted("https://h/p"), "https://h/p");
  EXPECT_EQ(url_redacted("https://h/p?"), "https://h/p?");
  EXPECT_EQ(url_redacted("https://h/p?token"), "https://h/p?[redacted]");
  EXPECT_EQ(url_redacted("https://h/p?a=&b=1&&c=${aggregateid}${type}"),
            "https://h/p?a=&b=[redacted]&&c=${aggregateid}${type}");
  EXPECT_EQ(url_redacted("https://h/p?k=x${type}"), "https://h/p?k=[redacted]");
  EXPECT_EQ(url_redacted("https://h/p?k=${type}#frag"), "https://h/p?k=${type}#[redacted]");
  EXPECT_EQ(url_redacted("https://h/p#"), "https://h/p");
}

TEST(HttpOptions, Classify) {
  EXPECT_EQ(HttpSink::classify(CURLE_OK, 200), Delivery::kAcked);
  EXPECT_EQ(HttpSink::classify(CURLE_TOO_MANY_REDIRECTS, 0), Delivery::kRejected);
  EXPECT_EQ(HttpSink::classify(CURLE_UNSUPPORTED_PROTOCOL, 0), Delivery::kRejected);
  EXPECT_EQ(HttpSink::classify(CURLE_OK, 204), Delivery::kAcked);
  for (long status : {408L, 429L, 500L, 502L, 503L, 504L}) {
    EXPECT_EQ(HttpSink::classify(CURLE_OK, status), Delivery::kUnavailable) << status;
  }
  for (long status : {301L, 302L, 400L, 401L, 404L, 410L, 413L, 422L}) {
    EXPECT_EQ(HttpSink::classify(CURLE_OK, status), Delivery::kRejected) << status;
  }
  for (CURLcode code :
       {CURLE_OPERATION_TIMEDOUT, CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST,
        CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_GOT_NOTHING}) {
    EXPECT_EQ(HttpSink::classify(code, 0), Delivery::kUnavailable) << code;
  }
  EXPECT_EQ(HttpSink::excerpt(std::string("a\nb\x01\xc3\xa9") + std::string(300, 'x')).size(),
            200u);
  EXPECT_EQ(HttpSink::excerpt("a\nb\x01\xc3\xa9"), "a b   ");
}

}  // namespace

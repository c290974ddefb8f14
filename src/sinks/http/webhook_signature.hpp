// Standard Webhooks 1.0 signatures (https://www.standardwebhooks.com): the receiver checks
// `webhook-signature` against HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<body>",
// keyed with the base64-decoded part of a `whsec_<base64>` secret. During a rotation the
// sender signs with every secret it holds and sends the signatures space-separated, so a
// receiver that knows either one accepts the request. Plain C++ over OpenSSL's libcrypto.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace outbox::sinks::webhook {

inline constexpr std::string_view kSecretPrefix = "whsec_";

// The keys of a secret file's content: one or more whitespace-separated `whsec_<base64>`
// secrets. Throws ConfigError naming the position of a bad one (1st, 2nd, ...), never its
// text: no secret prefix, bad base64, an empty key, or no secret at all.
std::vector<std::string> parse_secrets(std::string_view text);

// base64(HMAC-SHA256(key, id "." timestamp "." body)).
std::string sign(std::string_view key, std::string_view id, std::string_view timestamp,
                 std::string_view body);

// The `webhook-signature` header's value: "v1,<sig>" per key, space-separated.
std::string signature_header(const std::vector<std::string>& keys, std::string_view id,
                             std::string_view timestamp, std::string_view body);

// Standard base64 (with padding); decode returns false on anything else.
std::string base64_encode(std::string_view bytes);
bool base64_decode(std::string_view text, std::string& bytes);

}  // namespace outbox::sinks::webhook

#include "sinks/http/webhook_signature.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>

#include "sinks/common/sink.hpp"

namespace outbox::sinks::webhook {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool base64_decode(std::string_view text, std::string& bytes) {
  // EVP_DecodeBlock skips no characters we would refuse, so check the alphabet first.
  if (text.empty() || text.size() % 4 != 0) return false;
  std::size_t padding = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '=') {
      if (i + 2 < text.size()) return false;
      ++padding;
    } else if (padding > 0 || !(std::isalnum(c) || c == '+' || c == '/')) {
      return false;
    }
  }
  bytes.assign(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  bytes.resize(static_cast<std::size_t>(n) - padding);
  return true;
}

std::vector<std::string> parse_secrets(std::string_view text) {
  std::vector<std::string> keys;
  std::size_t at = 0;
  while (at < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[at]))) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    const std::string_view word = text.substr(at, end - at);
    const std::string which = "secret: the " + std::to_string(keys.size() + 1) +
                              (keys.size() == 0   ? "st"
                               : keys.size() == 1 ? "nd"
                                                  : "th") +
                              " secret in the file";
    if (word.substr(0, kSecretPrefix.size()) != kSecretPrefix) {
      throw ConfigError(which + " does not start with whsec_ (Standard Webhooks secrets do)");
    }
    std::string key;
    if (!base64_decode(word.substr(kSecretPrefix.size()), key) || key.empty()) {
      throw ConfigError(which + " is not whsec_ followed by base64");
    }
    keys.push_back(std::move(key));
    at = end;
  }
  if (keys.empty()) throw ConfigError("secret: the file holds no whsec_ secret");
  return keys;
}

std::string sign(std::string_view key, std::string_view id, std::string_view timestamp,
                 std::string_view body) {
  std::string content;
  content.reserve(id.size() + timestamp.size() + body.size() + 2);
  content.append(id).append(".").append(timestamp).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac,
           &mac_size) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return base64_encode(std::string_view(reinterpret_cast<const char*>(mac), mac_size));
}

std::string signature_header(const std::vector<std::string>& keys, std::string_view id,
                             std::string_view timestamp, std::string_view body) {
  std::string out;
  for (const std::string& key : keys) {
    if (!out.empty()) out += ' ';
    out += "v1," + sign(key, id, timestamp, body);
  }
  return out;
}

}  // namespace outbox::sinks::webhook

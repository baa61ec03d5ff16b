#include "server/auth/access_tokens.h"

#include <cctype>

namespace manypy {
namespace {

/// Equal strings in time that depends only on their lengths, not on where they
/// first differ: a client timing its failures learns nothing about the token.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

/// The token of "Bearer <token>" (scheme case-insensitive, RFC 6750); empty if
/// the value is not a bearer credential.
std::string_view BearerToken(std::string_view authorization) {
  std::string_view value = TrimAsciiSpace(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() ||
      !std::isspace(static_cast<unsigned char>(value[kScheme.size()]))) {
    return {};
  }
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return {};
  }
  return TrimAsciiSpace(value.substr(kScheme.size()));
}

}  // namespace

StatusOr<AccessTokens> AccessTokens::Load(const std::string& inference_token_file,
                                          const std::string& management_token_file) {
  std::string inference, management;
  if (!inference_token_file.empty()) {
    auto token = ReadTokenFile(inference_token_file, "auth-token-file");
    if (!token.ok()) return token.status();
    inference = std::move(*token);
  }
  if (!management_token_file.empty()) {
    auto token = ReadTokenFile(management_token_file, "management-token-file");
    if (!token.ok()) return token.status();
    management = std::move(*token);
  }
  if (!inference.empty() && ConstantTimeEquals(inference, management)) {
    return InvalidArgument(
        "--auth-token-file and --management-token-file hold the same token; the management "
        "token must differ, or every inference client could manage the repository");
  }
  return AccessTokens(std::move(inference), std::move(management));
}

Status AccessTokens::Authorize(std::string_view authorization, AccessScope scope) const {
  if (scope == AccessScope::kOpen) return Status::Ok();
  const bool management_call = scope == AccessScope::kManagement;
  // Without an inference token, inference is open; management is open only
  // when no token at all is configured (one token then guards everything).
  const bool open = management_call ? inference_.empty() && management_.empty() : inference_.empty();
  if (open) return Status::Ok();
  const char* what = management_call ? "repository management" : "this call";
  std::string_view token = BearerToken(authorization);
  if (token.empty()) {
    return Unauthenticated(std::string(what) + " needs a bearer token: send the header "
                           "'authorization: Bearer <token>'");
  }
  // Compare with both tokens whatever matches, so the time taken does not say which.
  const bool is_inference = !inference_.empty() && ConstantTimeEquals(token, inference_);
  const bool is_management = !management_.empty() && ConstantTimeEquals(token, management_);
  if (is_management) return Status::Ok();
  if (is_inference) {
    if (!management_call || management_.empty()) return Status::Ok();
    return PermissionDenied(
        "the inference token may not manage the repository; use the management token "
        "(--management-token-file)");
  }
  return Unauthenticated(std::string(what) + ": the bearer token is not valid");
}

}  // namespace manypy

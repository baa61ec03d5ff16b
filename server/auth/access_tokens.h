// AccessTokens: bearer-token authorization shared by the gRPC and HTTP frontends
// (an inference token and a separate repository-management token, each optional).
// Immutable after Load; thread-safe. Knows no protocol: callers pass the header value.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/token_file.h"  // ReadTokenFile: the server's token flags

namespace manypy {

/// What a request touches, from least to most privileged.
enum class AccessScope {
  kOpen,        ///< liveness/readiness probes: never need a token
  kInference,   ///< inference, metadata, config, statistics
  kManagement,  ///< the repository API: index, load, unload
};

class AccessTokens {
 public:
  /// No tokens: every scope is open.
  AccessTokens() = default;
  /// Either may be empty: no such token configured.
  AccessTokens(std::string inference_token, std::string management_token)
      : inference_(std::move(inference_token)), management_(std::move(management_token)) {}

  /// Reads the files named (an empty path: no such token).
  static StatusOr<AccessTokens> Load(const std::string& inference_token_file,
                                     const std::string& management_token_file);

  bool any() const { return !inference_.empty() || !management_.empty(); }
  bool has_management_token() const { return !management_.empty(); }

  /// Checks an `authorization` header value ("Bearer <token>"; empty: none sent):
  ///  - kOpen: always OK;
  ///  - kInference: OK when no inference token is configured; else the inference
  ///    token or the management token (the more privileged one);
  ///  - kManagement: the management token if one is configured (the inference
  ///    token gets PERMISSION_DENIED); else the inference token if one is; else OK.
  /// UNAUTHENTICATED when a needed token is missing or matches none.
  /// Tokens are compared in constant time and never appear in a message.
  Status Authorize(std::string_view authorization, AccessScope scope) const;

 private:
  std::string inference_;   // empty: none configured
  std::string management_;  // empty: none configured
};

}  // namespace manypy

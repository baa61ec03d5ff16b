// Bearer tokens for servers started with --auth-token-file /
// --management-token-file: read from a file (so they stay out of command lines
// and shell history) and sent as `authorization: Bearer <token>`.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy::client {

/// The token in `path`, read as the server reads its own token files
/// (common/token_file.h: one token of visible ASCII, surrounding whitespace
/// trimmed); INVALID_ARGUMENT naming `flag` and the file otherwise.
StatusOr<std::string> ReadBearerTokenFile(const std::string& path,
                                          const std::string& flag = "auth-token-file");

/// "Bearer <token>", the value of the authorization header / metadata.
std::string BearerAuthorization(const std::string& token);

}  // namespace manypy::client

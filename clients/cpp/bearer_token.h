// Bearer tokens for servers started with --auth-token-file /
// --management-token-file: read from a file (so they stay out of command lines
// and shell history) and sent as `authorization: Bearer <token>`.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy::client {

/// The token in `path`: the file's text without surrounding whitespace.
/// INVALID_ARGUMENT naming the file when it cannot be read, is empty, or holds
/// more than one word.
StatusOr<std::string> ReadBearerTokenFile(const std::string& path);

/// "Bearer <token>", the value of the authorization header / metadata.
std::string BearerAuthorization(const std::string& token);

}  // namespace manypy::client

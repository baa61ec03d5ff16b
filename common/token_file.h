// Token files: the one reader of a bearer token from a file, for the server
// (--auth-token-file, --management-token-file) and the clients that send one,
// so that both accept and refuse the same files with the same messages.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace manypy {

/// Reads a token file: one token; surrounding whitespace (the trailing newline)
/// is trimmed. INVALID_ARGUMENT naming `flag` (e.g. "auth-token-file") and the
/// file when it cannot be read, is empty, is larger than 4096 bytes, or holds
/// anything but visible ASCII (spaces inside included): what HTTP header values
/// and gRPC metadata carry. The token is never in a message.
StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag);

/// `s` without leading and trailing ASCII whitespace.
std::string_view TrimAsciiSpace(std::string_view s);

}  // namespace manypy

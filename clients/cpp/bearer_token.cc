#include "clients/cpp/bearer_token.h"

#include "common/token_file.h"

namespace manypy::client {

StatusOr<std::string> ReadBearerTokenFile(const std::string& path, const std::string& flag) {
  return ReadTokenFile(path, flag);
}

std::string BearerAuthorization(const std::string& token) { return "Bearer " + token; }

}  // namespace manypy::client

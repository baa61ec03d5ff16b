#include "clients/cpp/bearer_token.h"

#include <fstream>
#include <sstream>

namespace manypy::client {

StatusOr<std::string> ReadBearerTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("token file '" + path + "' cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  std::istringstream words(text.str());
  std::string token, extra;
  words >> token >> extra;
  if (token.empty()) return InvalidArgument("token file '" + path + "' is empty");
  if (!extra.empty()) {
    return InvalidArgument("token file '" + path + "' holds more than one word (one token expected)");
  }
  return token;
}

std::string BearerAuthorization(const std::string& token) { return "Bearer " + token; }

}  // namespace manypy::client

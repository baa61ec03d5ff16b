#include "common/token_file.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace manypy {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::string_view TrimAsciiSpace(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--" + flag + ": cannot read the token file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  if (content.size() > kMaxTokenBytes) {
    return InvalidArgument("--" + flag + ": the token file " + path + " is larger than " +
                           std::to_string(kMaxTokenBytes) + " bytes; it must hold one token");
  }
  std::string token(TrimAsciiSpace(content));
  if (token.empty()) return InvalidArgument("--" + flag + ": the token file " + path + " is empty");
  for (char c : token) {
    if (IsSpace(c) || c < 0x21 || c > 0x7e) {
      return InvalidArgument("--" + flag + ": the token file " + path +
                             " must hold one token of visible ASCII characters, without spaces");
    }
  }
  return token;
}

}  // namespace manypy

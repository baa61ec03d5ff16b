#include "server/lifecycle/model_name.h"

#include <cctype>

namespace manypy {

std::string Printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    out += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string("?");
  }
  return s.size() > 200 ? out + "..." : out;
}

Status CheckModelName(const std::string& name) {
  const std::string shown = "model name '" + Printable(name) + "'";
  if (name.empty()) return InvalidArgument("the model name is empty");
  if (name.find('\0') != std::string::npos || name.find('/') != std::string::npos ||
      name.find('\\') != std::string::npos || name.find("..") != std::string::npos) {
    return InvalidArgument(shown + " looks like a path; models load only by name from the "
                           "configured model repository");
  }
  bool charset = name.size() <= 128 && name[0] != '.';
  for (char c : name) {
    charset = charset && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  }
  if (!charset) {
    return InvalidArgument(shown + " is not 1-128 characters of [A-Za-z0-9_.-] "
                           "not starting with '.'");
  }
  return Status::Ok();
}

}  // namespace manypy

#include "server/core/load_request.h"

#include "server/lifecycle/model_name.h"

namespace manypy {

Status CheckLoadParameters(const std::vector<std::string>& parameter_names) {
  if (parameter_names.empty()) return Status::Ok();
  const std::string& first = parameter_names.front();
  const std::string shown = "load parameter '" + Printable(first) + "'";
  if (first == "config" || first.rfind("file:", 0) == 0) {
    return InvalidArgument(shown + " is refused: manypy loads models only by name from the "
                           "configured model repository, never a configuration or files sent "
                           "with the request");
  }
  return InvalidArgument(shown + " is not supported: a load request takes only the model name");
}

}  // namespace manypy

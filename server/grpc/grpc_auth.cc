#include "server/grpc/grpc_auth.h"

#include <string_view>

namespace manypy {

std::string_view AuthorizationOf(const grpc::CallbackServerContext& ctx) {
  // gRPC lower-cases metadata keys; a repeated key uses its first value.
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace manypy

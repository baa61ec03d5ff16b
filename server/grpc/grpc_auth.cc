#include "server/grpc/grpc_auth.h"

#include <string_view>

namespace manypy {

Status AuthorizeCall(const AccessTokens& tokens, const grpc::CallbackServerContext& ctx,
                     AccessScope scope) {
  if (scope == AccessScope::kOpen) return Status::Ok();
  // gRPC lower-cases metadata keys; a repeated key uses its first value.
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  std::string_view value;
  if (it != metadata.end()) value = std::string_view(it->second.data(), it->second.size());
  return tokens.Authorize(value, scope);
}

}  // namespace manypy

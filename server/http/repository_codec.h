// The repository extension's JSON (/v2/repository/index, .../load): request
// bodies in, the index out as Triton writes them. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// An index request's body: whether it asks for ready models only
/// ({"ready": true}); an empty or malformed body, or another "ready", asks for all.
bool DecodeRepositoryIndexRequest(std::string_view body);

/// The index as a bare JSON array (as Triton answers), one object per model.
std::string EncodeRepositoryIndex(const inference::RepositoryIndexResponse& index);

/// A load request's body: empty, or a JSON object whose "parameters"
/// (Triton's `config`, `file:<path>`, which the core refuses) have their
/// names appended to `names`. INVALID_ARGUMENT for a body that is no JSON
/// object, or "parameters" that is not one.
Status DecodeLoadRequest(std::string_view body, std::vector<std::string>* names);

}  // namespace manypy

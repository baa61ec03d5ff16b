// Shared-memory references of one request: an input or requested output that
// names a registered system shared-memory region with Triton's parameters
// (`shared_memory_region`, `shared_memory_byte_size`, optional
// `shared_memory_offset`), resolved to the region's mapping and checked
// against its size. Pure functions over the request; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "proto/grpc_service.pb.h"
#include "server/inference/shared_memory_regions.h"

namespace manypy {

using WireParameters = google::protobuf::Map<std::string, inference::InferParameter>;

/// Triton's names for the parameters that put a tensor in shared memory.
constexpr const char* kSharedMemoryRegion = "shared_memory_region";
constexpr const char* kSharedMemoryByteSize = "shared_memory_byte_size";
constexpr const char* kSharedMemoryOffset = "shared_memory_offset";

/// Whether `parameters` (an input's or requested output's) name a region.
bool NamesSharedMemory(const WireParameters& parameters);
/// Whether any input or requested output of `wire` names a region.
bool UsesSharedMemory(const inference::ModelInferRequest& wire);

/// The region `parameters` name, resolved in `regions`; nullopt when they
/// name none. INVALID_ARGUMENT, naming `what` ("input 'x'") and the region,
/// when shared memory is not accepted (`regions` null), only one of region
/// and byte size is given, a parameter has the wrong type or sign, the
/// region is not registered, or offset + byte size run past the region's end.
StatusOr<std::optional<SharedMemoryRef>> ResolveSharedMemory(const WireParameters& parameters,
                                                             const SharedMemoryRegions* regions,
                                                             const std::string& what);

}  // namespace manypy

#include "server/inference/shared_memory_refs.h"

namespace manypy {
namespace {

// A non-negative integer parameter (int64 or uint64 on the wire); nullopt when absent.
StatusOr<std::optional<uint64_t>> SizeParameter(const WireParameters& parameters, const char* key,
                                                const std::string& what) {
  auto it = parameters.find(key);
  if (it == parameters.end()) return std::optional<uint64_t>();
  using P = inference::InferParameter;
  const P& p = it->second;
  if (p.parameter_choice_case() == P::kUint64Param) return std::optional<uint64_t>(p.uint64_param());
  if (p.parameter_choice_case() == P::kInt64Param && p.int64_param() >= 0) {
    return std::optional<uint64_t>(static_cast<uint64_t>(p.int64_param()));
  }
  return InvalidArgument(what + ": parameter '" + key + "' must be a non-negative integer");
}

}  // namespace

bool NamesSharedMemory(const WireParameters& parameters) {
  return parameters.count(kSharedMemoryRegion) != 0 || parameters.count(kSharedMemoryByteSize) != 0 ||
         parameters.count(kSharedMemoryOffset) != 0;
}

bool UsesSharedMemory(const inference::ModelInferRequest& wire) {
  for (const auto& input : wire.inputs()) {
    if (NamesSharedMemory(input.parameters())) return true;
  }
  for (const auto& output : wire.outputs()) {
    if (NamesSharedMemory(output.parameters())) return true;
  }
  return false;
}

StatusOr<std::optional<SharedMemoryRef>> ResolveSharedMemory(const WireParameters& parameters,
                                                             const SharedMemoryRegions* regions,
                                                             const std::string& what) {
  if (!NamesSharedMemory(parameters)) return std::optional<SharedMemoryRef>();
  if (regions == nullptr) {
    return InvalidArgument(what + " names a shared memory region, which this server does not "
                           "accept (start it with --allow-client-shm)");
  }
  auto region_it = parameters.find(kSharedMemoryRegion);
  const bool has_region = region_it != parameters.end();
  if (has_region &&
      region_it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return InvalidArgument(what + ": parameter '" + std::string(kSharedMemoryRegion) + "' must be a string");
  }
  auto size = SizeParameter(parameters, kSharedMemoryByteSize, what);
  if (!size.ok()) return size.status();
  auto offset = SizeParameter(parameters, kSharedMemoryOffset, what);
  if (!offset.ok()) return offset.status();
  if (!has_region || !size->has_value()) {
    return InvalidArgument(what + ": shared memory needs both '" + std::string(kSharedMemoryRegion) +
                           "' and '" + kSharedMemoryByteSize + "'; the request gives only " +
                           (has_region ? kSharedMemoryRegion : size->has_value() ? kSharedMemoryByteSize : kSharedMemoryOffset));
  }
  const std::string& name = region_it->second.string_param();
  SharedMemoryRef ref;
  ref.region = regions->Find(name);
  if (ref.region == nullptr) {
    return InvalidArgument(what + ": no system shared memory region named '" + name +
                           "' is registered");
  }
  ref.offset = offset->value_or(0);
  ref.byte_size = **size;
  const uint64_t region_size = ref.region->byte_size();
  if (ref.offset > region_size || ref.byte_size > region_size - ref.offset) {
    return InvalidArgument(what + ": shared_memory_offset " + std::to_string(ref.offset) +
                           " + shared_memory_byte_size " + std::to_string(ref.byte_size) +
                           " run past the end of region '" + name + "' (" +
                           std::to_string(region_size) + " bytes)");
  }
  return std::optional<SharedMemoryRef>(std::move(ref));
}

}  // namespace manypy

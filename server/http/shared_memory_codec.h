// The shared-memory extension's JSON (Triton's /v2/systemsharedmemory and
// /v2/cudasharedmemory): register bodies to the protocol's requests, status
// responses to JSON arrays. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// Region `name`'s register body {"key": "/shm", "offset": 0, "byte_size": 64}:
/// "key" a string and "byte_size" a non-negative integer, both required;
/// "offset" a non-negative integer when given. INVALID_ARGUMENT naming the
/// field that is missing or of the wrong type, or for a body that is no JSON object.
Status DecodeSystemSharedMemoryRegister(std::string_view body, const std::string& name,
                                        inference::SystemSharedMemoryRegisterRequest* out);

/// Region `name`'s register body {"byte_size": 64, "device_id": 0}: "byte_size"
/// as above; "offset" checked as above (CUDA regions have none); "device_id"
/// taken when it is a non-negative integer. INVALID_ARGUMENT as above.
Status DecodeCudaSharedMemoryRegister(std::string_view body, const std::string& name,
                                      inference::CudaSharedMemoryRegisterRequest* out);

/// A bare JSON array (as Triton answers), one {"name", "key", "offset",
/// "byte_size"} object per region.
std::string EncodeSystemSharedMemoryStatus(
    const inference::SystemSharedMemoryStatusResponse& status);

/// A bare JSON array, one {"name", "device_id", "byte_size"} object per region.
std::string EncodeCudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusResponse& status);

}  // namespace manypy

// Fuzzes Prepare, the gRPC request path's decoding: a serialized ModelInferRequest (any
// datatype, typed or raw contents, any shape) decoded into the model's arguments for a
// manifest made to fit it (fuzz_manifest.h). Every outcome must be OK with values that
// match the request, or INVALID_ARGUMENT; anything else (a crash, UB, an uncaught
// exception, another status) is a bug. Groups nested past protobuf's recursion limit (the
// gRPC server's) must not parse; mutations include deep repeats of group tags
// (deep_inputs.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "fuzz/deep_inputs.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_manifest.h"
#include "server/grpc/grpc_malformed_requests.h"
#include "server/inference/prepare.h"

// Invalid UTF-8 in string fields is a parse failure here, as on the server; protobuf's log
// line for each would drown libFuzzer's output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

// No region is registered: a request naming one is refused as a client error.
const manypy::SharedMemoryRegions kNoRegions;

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return manypy::fuzz::MutateDeep(data, size, max_size, seed, manypy::fuzz::ProtobufGrammar());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace manypy;
  inference::ModelInferRequest request;
  const bool parsed = request.ParseFromArray(data, static_cast<int>(size));
  const int depth = fuzz::ProtobufGroupDepth(
      std::string_view(reinterpret_cast<const char*>(data), size));
  FUZZ_CHECK(!parsed || depth <= kProtobufRecursionLimit,
             "a message with groups %d levels deep parsed", depth);
  if (!parsed) return 0;
  Manifest manifest = fuzz::ManifestForRequest(request);
  InferenceRequest prepared;
  Status s = PrepareRequest(request, manifest, std::chrono::microseconds(0),
                            Clock::time_point::max(), &kNoRegions, &prepared);
  if (s.ok()) {
    fuzz::CheckPrepared(request, manifest, prepared);
  } else {
    FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "%s", s.ToString().c_str());
  }
  return 0;
}

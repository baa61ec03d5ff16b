// Fuzzes the remaining JSON bodies the HTTP frontend reads: the first byte picks the
// decoder (mod 4: repository index, repository load, system shared-memory register, CUDA
// shared-memory register), the rest is the body. Properties:
//   - a refusal is INVALID_ARGUMENT with a message; a body nested past the JSON limit is
//     refused naming it, and no body within it is refused as too deep (the index request,
//     which answers only yes or no, must answer no);
//   - a register body accepted round-trips through the status encoder: the region's
//     key, offset, byte size and device as decoded.
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_limits.h"
#include "fuzz/deep_inputs.h"
#include "fuzz/fuzz_check.h"
#include "server/http/json_body.h"
#include "server/http/repository_codec.h"
#include "server/http/shared_memory_codec.h"

namespace {

using namespace manypy;

void CheckRefusal(const Status& s) {
  if (s.ok()) return;
  FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "%s", s.ToString().c_str());
  FUZZ_CHECK(!s.message().empty(), "refused without a message");
}

// The status encoder's one region, parsed back.
const rapidjson::Value& OneRegion(const std::string& text, rapidjson::Document* doc) {
  Status s = ParseJsonBody(text, "the status", doc);
  FUZZ_CHECK(s.ok(), "the status encoder wrote bad JSON: %s\n%s", s.ToString().c_str(),
             text.c_str());
  FUZZ_CHECK(doc->IsArray() && doc->Size() == 1 && (*doc)[0].IsObject(),
             "not one region: %s", text.c_str());
  return (*doc)[0];
}

void SystemRegister(std::string_view body, int depth) {
  inference::SystemSharedMemoryRegisterRequest request;
  Status s = DecodeSystemSharedMemoryRegister(body, "region", &request);
  fuzz::CheckDepthVerdict(s, depth, "the register request's body");
  CheckRefusal(s);
  if (!s.ok()) return;
  FUZZ_CHECK(request.name() == "region", "name %s", request.name().c_str());
  inference::SystemSharedMemoryStatusResponse status;
  auto& region = (*status.mutable_regions())["region"];
  region.set_name(request.name());
  region.set_key(request.key());
  region.set_offset(request.offset());
  region.set_byte_size(request.byte_size());
  rapidjson::Document doc;
  const rapidjson::Value& back = OneRegion(EncodeSystemSharedMemoryStatus(status), &doc);
  FUZZ_CHECK(back["key"].IsString() &&
                 std::string(back["key"].GetString(), back["key"].GetStringLength()) ==
                     request.key(),
             "the key does not round-trip through the status (%zu bytes)", request.key().size());
  FUZZ_CHECK(back["offset"].IsUint64() && back["offset"].GetUint64() == request.offset(),
             "offset does not round-trip");
  FUZZ_CHECK(back["byte_size"].IsUint64() && back["byte_size"].GetUint64() == request.byte_size(),
             "byte_size does not round-trip");
}

void CudaRegister(std::string_view body, int depth) {
  inference::CudaSharedMemoryRegisterRequest request;
  Status s = DecodeCudaSharedMemoryRegister(body, "region", &request);
  fuzz::CheckDepthVerdict(s, depth, "the register request's body");
  CheckRefusal(s);
  if (!s.ok()) return;
  FUZZ_CHECK(request.device_id() >= 0, "device %lld", static_cast<long long>(request.device_id()));
  inference::CudaSharedMemoryStatusResponse status;
  auto& region = (*status.mutable_regions())["region"];
  region.set_name(request.name());
  region.set_device_id(request.device_id());
  region.set_byte_size(request.byte_size());
  rapidjson::Document doc;
  const rapidjson::Value& back = OneRegion(EncodeCudaSharedMemoryStatus(status), &doc);
  FUZZ_CHECK(back["byte_size"].IsUint64() && back["byte_size"].GetUint64() == request.byte_size(),
             "byte_size does not round-trip");
  FUZZ_CHECK(back["device_id"].IsInt64() && back["device_id"].GetInt64() == request.device_id(),
             "device_id does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const int depth = fuzz::RapidJsonDepth(body, false);
  switch (data[0] % 4) {
    case 0: {
      const bool ready = DecodeRepositoryIndexRequest(body);
      FUZZ_CHECK(!ready || depth <= kMaxJsonDepth, "a body %d levels deep asked for ready models",
                 depth);
      break;
    }
    case 1: {
      std::vector<std::string> names;
      Status s = DecodeLoadRequest(body, &names);
      fuzz::CheckDepthVerdict(s, depth, "the load request's body");
      CheckRefusal(s);
      FUZZ_CHECK(s.ok() || names.empty(), "a refused load request named %zu parameters",
                 names.size());
      break;
    }
    case 2:
      SystemRegister(body, depth);
      break;
    default:
      CudaRegister(body, depth);
  }
  return 0;
}

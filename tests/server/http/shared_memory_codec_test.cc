// The shared-memory extension's JSON: register bodies decoded for both kinds
// of region, each bad body refused with a message naming what was wrong, and
// status responses encoded as Triton's bare arrays.
#include "server/http/shared_memory_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace manypy {
namespace {

TEST(SharedMemoryCodecTest, DecodesASystemRegion) {
  inference::SystemSharedMemoryRegisterRequest request;
  ASSERT_TRUE(DecodeSystemSharedMemoryRegister(R"({"key": "/shm", "offset": 8, "byte_size": 64})",
                                               "r", &request)
                  .ok());
  EXPECT_EQ(request.name(), "r");
  EXPECT_EQ(request.key(), "/shm");
  EXPECT_EQ(request.offset(), 8u);
  EXPECT_EQ(request.byte_size(), 64u);

  inference::SystemSharedMemoryRegisterRequest no_offset;
  ASSERT_TRUE(
      DecodeSystemSharedMemoryRegister(R"({"key": "/shm", "byte_size": 0})", "r", &no_offset).ok());
  EXPECT_EQ(no_offset.offset(), 0u);
}

/// The message DecodeSystemSharedMemoryRegister refuses `body` with ("" when it accepts it).
std::string SystemRefusal(const std::string& body) {
  inference::SystemSharedMemoryRegisterRequest request;
  Status s = DecodeSystemSharedMemoryRegister(body, "r", &request);
  EXPECT_TRUE(s.ok() || s.code() == StatusCode::kInvalidArgument) << s.ToString();
  return s.message();
}

TEST(SharedMemoryCodecTest, BadSystemBodiesNameWhatIsWrong) {
  const std::string not_object = "the register request's body is not a JSON object";
  EXPECT_EQ(SystemRefusal(""),
            "the register request's body is not valid JSON: The document is empty at offset 0");
  EXPECT_EQ(SystemRefusal("{"),
            "the register request's body is not valid JSON: Missing a name for object member at offset 1");
  EXPECT_EQ(SystemRefusal("[1]"), not_object);
  const std::string offset = "register: 'offset' must be a non-negative integer";
  EXPECT_EQ(SystemRefusal(R"({"key": "/k", "offset": -1, "byte_size": 4})"), offset);
  EXPECT_EQ(SystemRefusal(R"({"key": "/k", "offset": "0", "byte_size": 4})"), offset);
  EXPECT_EQ(SystemRefusal(R"({"key": "/k", "offset": 1.5, "byte_size": 4})"), offset);
  const std::string byte_size = "register: 'byte_size' must be given, a non-negative integer";
  EXPECT_EQ(SystemRefusal(R"({"key": "/x"})"), byte_size);
  EXPECT_EQ(SystemRefusal(R"({"key": "/x", "byte_size": -4})"), byte_size);
  EXPECT_EQ(SystemRefusal(R"({"key": "/x", "byte_size": null})"), byte_size);
  const std::string key = "register: 'key' must be given, a string";
  EXPECT_EQ(SystemRefusal(R"({"byte_size": 4})"), key);
  EXPECT_EQ(SystemRefusal(R"({"key": 7, "byte_size": 4})"), key);
  // The first thing wrong is the one named.
  EXPECT_EQ(SystemRefusal(R"({"offset": -1})"), offset);
}

TEST(SharedMemoryCodecTest, DecodesACudaRegion) {
  inference::CudaSharedMemoryRegisterRequest request;
  ASSERT_TRUE(
      DecodeCudaSharedMemoryRegister(R"({"byte_size": 64, "device_id": 1})", "gpu", &request).ok());
  EXPECT_EQ(request.name(), "gpu");
  EXPECT_EQ(request.byte_size(), 64u);
  EXPECT_EQ(request.device_id(), 1);

  inference::CudaSharedMemoryRegisterRequest
      odd_device;  // a device_id that is no integer is left out
  ASSERT_TRUE(
      DecodeCudaSharedMemoryRegister(R"({"byte_size": 64, "device_id": "x"})", "gpu", &odd_device)
          .ok());
  EXPECT_EQ(odd_device.device_id(), 0);
}

TEST(SharedMemoryCodecTest, BadCudaBodiesNameWhatIsWrong) {
  inference::CudaSharedMemoryRegisterRequest request;
  Status s = DecodeCudaSharedMemoryRegister("nope", "gpu", &request);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the register request's body is not valid JSON: Invalid value at offset 1");
  s = DecodeCudaSharedMemoryRegister(R"({"device_id": 0})", "gpu", &request);
  EXPECT_EQ(s.message(), "register: 'byte_size' must be given, a non-negative integer");
  s = DecodeCudaSharedMemoryRegister(R"({"byte_size": 4, "offset": true})", "gpu", &request);
  EXPECT_EQ(s.message(), "register: 'offset' must be a non-negative integer");
}

TEST(SharedMemoryCodecTest, EncodesStatusAsABareArray) {
  inference::SystemSharedMemoryStatusResponse none;
  EXPECT_EQ(EncodeSystemSharedMemoryStatus(none), "[]");
  inference::SystemSharedMemoryStatusResponse one;
  auto& region = (*one.mutable_regions())["b"];
  region.set_name("b");
  region.set_key("/shm_b");
  region.set_offset(16);
  region.set_byte_size(4096);
  EXPECT_EQ(EncodeSystemSharedMemoryStatus(one),
            R"([{"name":"b","key":"/shm_b","offset":16,"byte_size":4096}])");

  inference::CudaSharedMemoryStatusResponse cuda_none;
  EXPECT_EQ(EncodeCudaSharedMemoryStatus(cuda_none), "[]");
  inference::CudaSharedMemoryStatusResponse cuda;
  auto& gpu = (*cuda.mutable_regions())["gpu"];
  gpu.set_device_id(1);
  gpu.set_byte_size(64);
  EXPECT_EQ(EncodeCudaSharedMemoryStatus(cuda), R"([{"name":"gpu","device_id":1,"byte_size":64}])");
}

}  // namespace
}  // namespace manypy

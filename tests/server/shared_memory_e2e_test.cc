// System shared memory end to end (the real server, gRPC and HTTP), Triton's
// extension: regions registered, listed and unregistered; inputs read from
// and outputs written into a client's region, for every datatype; each
// error (a missing size, an unknown region, a range outside it, a region too
// small for the output, the extension off, a connection not from this host,
// CUDA shared memory) answered with its reason and counted once; a region
// unregistered mid-request; a view the model keeps past its request.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "tests/test_util/client_shm_region.h"
#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

using testing::ClientRegion;
using testing::SetRegion;

// two_io with both inputs in region "in" (A at 0, B at 16) and both outputs
// in region "out" (SUM at 0, PRODUCT at 16).
ModelInferRequest TwoIoInSharedMemory() {
  ModelInferRequest r = TwoIoRequest(true);
  r.clear_raw_input_contents();
  SetRegion(r.mutable_inputs(0)->mutable_parameters(), "in", 16);
  SetRegion(r.mutable_inputs(1)->mutable_parameters(), "in", 32, 16);
  for (const char* name : {"SUM", "PRODUCT"}) {
    auto* o = r.add_outputs();
    o->set_name(name);
    SetRegion(o->mutable_parameters(), "out", 16, std::string(name) == "SUM" ? 0 : 16);
  }
  return r;
}

// The same request in HTTP JSON.
const char* kTwoIoSharedMemoryJson = R"({"inputs": [
  {"name": "INPUT_A", "shape": [4], "datatype": "FP32",
   "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 16}},
  {"name": "INPUT_B", "shape": [4], "datatype": "INT64",
   "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 32,
                  "shared_memory_offset": 16}}],
 "outputs": [
  {"name": "SUM", "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": 16}},
  {"name": "PRODUCT", "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": 16,
                                     "shared_memory_offset": 16}}]})";

std::string RegisterJson(const std::string& key, uint64_t offset, uint64_t byte_size) {
  return "{\"key\": \"" + key + "\", \"offset\": " + std::to_string(offset) +
         ", \"byte_size\": " + std::to_string(byte_size) + "}";
}

class SharedMemoryTest : public ServerTest {
 protected:
  grpc::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size) {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryRegisterRequest request;
    request.set_name(name);
    request.set_key(key);
    request.set_offset(offset);
    request.set_byte_size(byte_size);
    inference::SystemSharedMemoryRegisterResponse response;
    return stub_->SystemSharedMemoryRegister(&ctx, request, &response);
  }
  grpc::Status Unregister(const std::string& name) {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(name);
    inference::SystemSharedMemoryUnregisterResponse response;
    return stub_->SystemSharedMemoryUnregister(&ctx, request, &response);
  }
  grpc::Status Status(const std::string& name, inference::SystemSharedMemoryStatusResponse* out) {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryStatusRequest request;
    request.set_name(name);
    return stub_->SystemSharedMemoryStatus(&ctx, request, out);
  }
  // Whether the server process has `key` mapped (its /proc maps name the object).
  bool ServerMaps(const std::string& key) {
    std::ifstream maps("/proc/" + std::to_string(server_.serving_pid()) + "/maps");
    std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    return all.find("/dev/shm" + key) != std::string::npos;
  }
  // Whether `key` is unmapped within a second: a request lets go of its
  // regions just after its reply is sent.
  bool ServerUnmaps(const std::string& key) {
    for (int i = 0; i < 100 && ServerMaps(key); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return !ServerMaps(key);
  }
  // Stops this test's server, to start another with other flags.
  void Restart(std::vector<std::string> args) {
    EXPECT_EQ(server_.Stop(), 0);
    StartServer(std::move(args));
  }
  // Both regions of TwoIoInSharedMemory, inputs written.
  void RegisterTwoIoRegions(const ClientRegion& in, const ClientRegion& out) {
    in.Write(0, std::vector<float>{1, 2, 3, 4});
    in.Write(16, std::vector<int64_t>{10, 20, 30, 40});
    ASSERT_TRUE(Register("in", in.key(), 0, 48).ok());
    ASSERT_TRUE(Register("out", out.key(), 0, 32).ok());
  }
  // A refusal's code and message, through gRPC and through HTTP.
  void ExpectRefused(const ModelInferRequest& grpc_request, const std::string& http_body,
                     grpc::StatusCode code, int http_status, const std::string& says) {
    ModelInferResponse response;
    grpc::Status s = Infer(grpc_request, &response);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(says), std::string::npos) << s.error_message();
    testing::HttpConnection http(server_.http_port());
    testing::HttpReply reply = http.Send("POST", "/v2/models/two_io/infer", http_body);
    EXPECT_EQ(reply.status, http_status) << reply.body;
    EXPECT_NE(reply.body.find(says), std::string::npos) << reply.body;
  }
};

TEST_F(SharedMemoryTest, RegionsAreRegisteredListedAndUnregisteredOverBothProtocols) {
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=two_io"});
  ClientRegion a("list_a", 8192), b("list_b", 4096);
  ASSERT_TRUE(Register("a", a.key(), 4096, 1000).ok());  // an offset past a page: mapped from it
  grpc::Status again = Register("a", b.key(), 0, 16);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();

  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply =
      http.Send("POST", "/v2/systemsharedmemory/region/b/register", RegisterJson(b.key(), 0, 4096));
  ASSERT_EQ(reply.status, 200) << reply.body;
  reply = http.Send("POST", "/v2/systemsharedmemory/region/b/register", RegisterJson(b.key(), 0, 16));
  EXPECT_EQ(reply.status, 409) << reply.body;
  EXPECT_NE(reply.body.find("already registered"), std::string::npos) << reply.body;

  inference::SystemSharedMemoryStatusResponse status;
  ASSERT_TRUE(Status("", &status).ok());
  ASSERT_EQ(status.regions_size(), 2);
  EXPECT_EQ(status.regions().at("a").key(), a.key());
  EXPECT_EQ(status.regions().at("a").offset(), 4096u);
  EXPECT_EQ(status.regions().at("a").byte_size(), 1000u);
  reply = http.Send("GET", "/v2/systemsharedmemory/region/b/status");
  ASSERT_EQ(reply.status, 200) << reply.body;
  rapidjson::Document listed;
  listed.Parse(reply.body.c_str());
  ASSERT_TRUE(listed.IsArray() && listed.Size() == 1) << reply.body;
  EXPECT_STREQ(listed[0]["name"].GetString(), "b");
  EXPECT_EQ(listed[0]["key"].GetString(), b.key());
  EXPECT_EQ(listed[0]["byte_size"].GetUint64(), 4096u);
  EXPECT_TRUE(ServerMaps(a.key()));  // mapped once, at registration

  // Unknown names: status NOT_FOUND; unregister is no error (as Triton).
  inference::SystemSharedMemoryStatusResponse none;
  EXPECT_EQ(Status("nope", &none).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(http.Send("GET", "/v2/systemsharedmemory/region/nope/status").status, 404);
  EXPECT_TRUE(Unregister("nope").ok());

  EXPECT_EQ(http.Send("POST", "/v2/systemsharedmemory/region/a/unregister").status, 200);
  EXPECT_TRUE(ServerUnmaps(a.key()));  // no request holds it
  ASSERT_TRUE(Status("", &status).ok());
  reply = http.Send("GET", "/v2/systemsharedmemory/status");
  EXPECT_EQ(reply.body.find("\"a\""), std::string::npos) << reply.body;
  EXPECT_NE(reply.body.find("\"b\""), std::string::npos) << reply.body;
  EXPECT_TRUE(Unregister("").ok());  // all
  EXPECT_EQ(http.Send("GET", "/v2/systemsharedmemory/status").body, "[]");

  // Registration errors name the key: no such object, past its end, a bad key.
  grpc::Status missing = Register("m", "/manypy_test_no_such_object", 0, 16);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(missing.error_message().find("/manypy_test_no_such_object"), std::string::npos)
      << missing.error_message();
  grpc::Status past = Register("p", b.key(), 4000, 200);
  EXPECT_EQ(past.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(past.error_message().find("past the object's end (4096 bytes)"), std::string::npos)
      << past.error_message();
  reply = http.Send("POST", "/v2/systemsharedmemory/region/k/register",
                    RegisterJson("/../etc/passwd", 0, 16));
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_NE(reply.body.find("POSIX shared-memory name"), std::string::npos) << reply.body;
  reply = http.Send("POST", "/v2/systemsharedmemory/region/k/register", R"({"key": "/x"})");
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body.find("byte_size"), std::string::npos) << reply.body;

  // The extension is in ServerMetadata.
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse meta;
  ASSERT_TRUE(stub_->ServerMetadata(&ctx, inference::ServerMetadataRequest(), &meta).ok());
  EXPECT_NE(std::find(meta.extensions().begin(), meta.extensions().end(), "system_shared_memory"),
            meta.extensions().end());
}

TEST_F(SharedMemoryTest, InputsAndOutputsGoThroughTheClientsRegionsOverBothProtocols) {
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=two_io"});
  ClientRegion in("io_in", 48), out("io_out", 32);
  RegisterTwoIoRegions(in, out);

  ModelInferResponse response;
  grpc::Status s = Infer(TwoIoInSharedMemory(), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.Read<float>(0, 4), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(out.Read<float>(16, 4), (std::vector<float>{10, 40, 90, 160}));
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);  // one (empty) per output, as Triton's
  EXPECT_TRUE(response.raw_output_contents(0).empty());
  EXPECT_EQ(response.outputs(1).shape(0), 4);
  EXPECT_EQ(response.outputs(1).parameters().at("shared_memory_region").string_param(), "out");
  EXPECT_EQ(response.outputs(1).parameters().at("shared_memory_byte_size").int64_param(), 16);
  EXPECT_EQ(response.outputs(1).parameters().at("shared_memory_offset").int64_param(), 16);

  // One input in memory, one in raw_input_contents (then one raw entry), one
  // output in the response.
  ModelInferRequest mixed = TwoIoRequest(true);
  mixed.clear_raw_input_contents();
  SetRegion(mixed.mutable_inputs(0)->mutable_parameters(), "in", 16);
  mixed.add_raw_input_contents(Raw(std::vector<int64_t>{1, 1, 1, 1}));
  mixed.add_outputs()->set_name("SUM");
  ModelInferResponse mixed_response;
  s = Infer(mixed, &mixed_response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(FromRaw<float>(mixed_response.raw_output_contents(0)), (std::vector<float>{2, 3, 4, 5}));

  // HTTP: the same request in JSON; outputs carry no data, only where they went.
  memset(out.data(), 0, 32);
  in.Write(0, std::vector<float>{2, 2, 2, 2});
  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply = http.Send("POST", "/v2/models/two_io/infer", kTwoIoSharedMemoryJson);
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(out.Read<float>(0, 4), (std::vector<float>{12, 22, 32, 42}));
  EXPECT_EQ(out.Read<float>(16, 4), (std::vector<float>{20, 40, 60, 80}));
  rapidjson::Document body;
  body.Parse(reply.body.c_str());
  ASSERT_TRUE(body.IsObject()) << reply.body;
  EXPECT_FALSE(body["outputs"][0].HasMember("data")) << reply.body;
  EXPECT_EQ(body["outputs"][0]["parameters"]["shared_memory_byte_size"].GetInt64(), 16) << reply.body;
  EXPECT_EQ(Statistics("two_io").inference_stats().success().count(), 3u);
}

TEST_F(SharedMemoryTest, EveryDatatypeRoundTripsThroughSharedMemory) {
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=echo_all"});
  const std::vector<std::string> types = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64",
                                          "INT8", "INT16", "INT32", "INT64", "FP16",
                                          "BF16", "FP32", "FP64", "BYTES"};
  const std::map<std::string, size_t> width = {
      {"BOOL", 1}, {"UINT8", 1}, {"UINT16", 2}, {"UINT32", 4}, {"UINT64", 8}, {"INT8", 1},
      {"INT16", 2}, {"INT32", 4}, {"INT64", 8}, {"FP16", 2}, {"BF16", 2}, {"FP32", 4}, {"FP64", 8}};
  // Each input's 4 elements at its own offset (some not aligned for their
  // type: copied rather than viewed), the output at the same offset of "out".
  ClientRegion in("types_in", 1024), out("types_out", 1024);
  ASSERT_TRUE(Register("in", in.key(), 0, 1024).ok());
  ASSERT_TRUE(Register("out", out.key(), 0, 1024).ok());
  ModelInferRequest request;
  request.set_model_name("echo_all");
  std::vector<std::string> expected;
  std::vector<size_t> offsets;
  size_t offset = 1;  // odd on purpose
  for (const std::string& dt : types) {
    std::string bytes;
    if (dt == "BYTES") {
      for (std::string item : {"a", "bb", "", "dddd"}) {
        uint32_t n = static_cast<uint32_t>(item.size());
        bytes.append(reinterpret_cast<const char*>(&n), 4).append(item);
      }
    } else {
      for (size_t i = 0; i < 4 * width.at(dt); ++i) bytes.push_back(static_cast<char>(dt == "BOOL" ? i % 2 : i % 7 + 1));
    }
    memcpy(in.data() + offset, bytes.data(), bytes.size());
    auto* input = request.add_inputs();
    input->set_name("IN_" + dt);
    input->set_datatype(dt);
    input->add_shape(4);
    SetRegion(input->mutable_parameters(), "in", static_cast<int64_t>(bytes.size()), offset);
    auto* output = request.add_outputs();
    output->set_name("OUT_" + dt);
    SetRegion(output->mutable_parameters(), "out", 64, offset);
    expected.push_back(bytes);
    offsets.push_back(offset);
    offset += 64 + (dt == "INT32" ? 3 : 0);
  }
  ModelInferResponse response;
  grpc::Status s = Infer(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  for (size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(std::string(out.data() + offsets[i], expected[i].size()), expected[i]) << types[i];
    EXPECT_EQ(response.outputs(static_cast<int>(i)).parameters().at("shared_memory_byte_size").int64_param(),
              static_cast<int64_t>(expected[i].size()))
        << types[i];
  }
}

TEST_F(SharedMemoryTest, EachErrorIsRefusedWithItsReasonAndCountedOnce) {
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=two_io"});
  ClientRegion in("err_in", 48), out("err_out", 32);
  RegisterTwoIoRegions(in, out);
  const std::string a_raw = R"({"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [1, 2, 3, 4]})";
  auto http_with_a = [&a_raw](const std::string& a_parameters, const std::string& outputs = "") {
    return R"({"inputs": [{"name": "INPUT_A", "shape": [4], "datatype": "FP32", "parameters": )" +
           a_parameters + "}, " + a_raw + "]" + (outputs.empty() ? "" : ", \"outputs\": " + outputs) + "}";
  };
  auto grpc_with_a = [](std::function<void(google::protobuf::Map<std::string, inference::InferParameter>*)> set) {
    ModelInferRequest r = TwoIoRequest(true);
    r.clear_raw_input_contents();
    r.add_raw_input_contents(Raw(std::vector<int64_t>{1, 2, 3, 4}));
    set(r.mutable_inputs(0)->mutable_parameters());
    return r;
  };
  using Params = google::protobuf::Map<std::string, inference::InferParameter>;

  // Only one of region and size.
  ExpectRefused(grpc_with_a([](Params* p) { (*p)["shared_memory_region"].set_string_param("in"); }),
                http_with_a(R"({"shared_memory_region": "in"})"), grpc::StatusCode::INVALID_ARGUMENT,
                400, "needs both 'shared_memory_region' and 'shared_memory_byte_size'");
  // A region never registered.
  ExpectRefused(grpc_with_a([](Params* p) { SetRegion(p, "nowhere", 16); }),
                http_with_a(R"({"shared_memory_region": "nowhere", "shared_memory_byte_size": 16})"),
                grpc::StatusCode::INVALID_ARGUMENT, 400,
                "no system shared memory region named 'nowhere' is registered");
  // A range outside the region.
  ExpectRefused(grpc_with_a([](Params* p) { SetRegion(p, "in", 16, 40); }),
                http_with_a(R"({"shared_memory_region": "in", "shared_memory_byte_size": 16,
                               "shared_memory_offset": 40})"),
                grpc::StatusCode::INVALID_ARGUMENT, 400, "run past the end of region 'in' (48 bytes)");
  // A size that is not the tensor's.
  ExpectRefused(grpc_with_a([](Params* p) { SetRegion(p, "in", 12); }),
                http_with_a(R"({"shared_memory_region": "in", "shared_memory_byte_size": 12})"),
                grpc::StatusCode::INVALID_ARGUMENT, 400,
                "has shared_memory_byte_size 12, shape [4] of FP32 needs 16");
  // An output region too small for the result (found once it is computed).
  ModelInferRequest small = TwoIoRequest(true);
  SetRegion(small.add_outputs()->mutable_parameters(), "out", 8);
  small.mutable_outputs(0)->set_name("SUM");
  ExpectRefused(small, R"({"inputs": [{"name": "INPUT_A", "shape": [4], "datatype": "FP32",
      "data": [1, 2, 3, 4]}, )" + a_raw + R"(], "outputs": [{"name": "SUM", "parameters":
      {"shared_memory_region": "out", "shared_memory_byte_size": 8}}]})",
                grpc::StatusCode::INVALID_ARGUMENT, 400,
                "output 'SUM' is 16 bytes; the shared_memory_byte_size the request gave for it in region 'out' is 8");
  // Data beside a region (HTTP), contents beside a region (gRPC).
  ModelInferRequest both = TwoIoRequest(false);
  SetRegion(both.mutable_inputs(0)->mutable_parameters(), "in", 16);
  ModelInferResponse response;
  grpc::Status s = Infer(both, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("has contents although it is in shared memory"), std::string::npos)
      << s.error_message();
  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply = http.Send(
      "POST", "/v2/models/two_io/infer",
      R"({"inputs": [{"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4],
          "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 16}}, )" + a_raw + "]}");
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body.find("must have neither 'data' nor binary_data_size"), std::string::npos) << reply.body;

  // Each refusal counted once, as a failure; the server still serves.
  EXPECT_EQ(Statistics("two_io").inference_stats().fail().count(), 12u);
  ASSERT_TRUE(Infer(TwoIoInSharedMemory(), &response).ok());
  EXPECT_EQ(out.Read<float>(0, 4), (std::vector<float>{11, 22, 33, 44}));
}

TEST_F(SharedMemoryTest, OffByDefaultAndCudaSharedMemoryIsRefused) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  ClientRegion region("off", 64);
  grpc::Status s = Register("r", region.key(), 0, 64);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("--allow-client-shm"), std::string::npos) << s.error_message();
  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply =
      http.Send("POST", "/v2/systemsharedmemory/region/r/register", RegisterJson(region.key(), 0, 64));
  EXPECT_EQ(reply.status, 403);
  EXPECT_NE(reply.body.find("--allow-client-shm"), std::string::npos) << reply.body;
  // An inference request that names a region is refused the same way.
  ModelInferRequest request = TwoIoRequest(true);
  request.clear_raw_input_contents();
  SetRegion(request.mutable_inputs(0)->mutable_parameters(), "r", 16);
  SetRegion(request.mutable_inputs(1)->mutable_parameters(), "r", 32, 16);
  ExpectRefused(request, kTwoIoSharedMemoryJson, grpc::StatusCode::PERMISSION_DENIED, 403,
                "client shared memory is off on this server");

  Restart({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=two_io"});
  grpc::ClientContext ctx;
  inference::CudaSharedMemoryRegisterRequest cuda;
  cuda.set_name("gpu");
  cuda.set_raw_handle(std::string(64, 'x'));
  cuda.set_byte_size(64);
  inference::CudaSharedMemoryRegisterResponse cuda_response;
  s = stub_->CudaSharedMemoryRegister(&ctx, cuda, &cuda_response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("CPU-only"), std::string::npos) << s.error_message();
  testing::HttpConnection http2(server_.http_port());
  reply = http2.Send("POST", "/v2/cudasharedmemory/region/gpu/register",
                     R"({"raw_handle": {"b64": "eHh4"}, "device_id": 0, "byte_size": 64})");
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body.find("CPU-only"), std::string::npos) << reply.body;
  EXPECT_EQ(http2.Send("GET", "/v2/cudasharedmemory/status").body, "[]");
  EXPECT_EQ(http2.Send("POST", "/v2/cudasharedmemory/unregister").status, 200);
}

TEST_F(SharedMemoryTest, AConnectionNotFromThisHostIsRefusedUnlessTheOperatorAllowsIt) {
  // This host's address on its network interface: a connection to it is
  // not a loopback one.
  std::string address;
  FILE* p = popen("hostname -I 2>/dev/null", "r");
  if (p != nullptr) {
    char buf[256] = {0};
    if (fgets(buf, sizeof(buf), p) != nullptr) address = std::string(buf).substr(0, std::string(buf).find_first_of(" \n"));
    pclose(p);
  }
  if (address.empty() || address.find(':') != std::string::npos) {
    GTEST_SKIP() << "this machine has no IPv4 address besides loopback (hostname -I)";
  }
  ClientRegion region("remote", 64);
  // gRPC on every address too (the fixture's 127.0.0.1 comes first; the last one given wins).
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=two_io",
               "--grpc-address=0.0.0.0"});
  {
    const std::string port = server_.address().substr(server_.address().rfind(':') + 1);
    auto remote_stub = GRPCInferenceService::NewStub(
        grpc::CreateChannel(address + ":" + port, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryStatusResponse status;
    grpc::Status s = remote_stub->SystemSharedMemoryStatus(
        &ctx, inference::SystemSharedMemoryStatusRequest(), &status);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    EXPECT_NE(s.error_message().find("not from this host"), std::string::npos) << s.error_message();
    testing::HttpConnection remote(server_.http_port(), address);
    testing::HttpReply reply = remote.Send("POST", "/v2/systemsharedmemory/region/r/register",
                                           RegisterJson(region.key(), 0, 64));
    EXPECT_EQ(reply.status, 403) << reply.body;
    EXPECT_NE(reply.body.find("not from this host"), std::string::npos) << reply.body;
    EXPECT_EQ(remote.Send("GET", "/v2/health/ready").status, 200);  // everything else is served
  }
  Restart({"--allow-client-shm", "--allow-client-shm-remote", "--model-control-mode=explicit",
           "--load-model=two_io"});
  testing::HttpConnection remote(server_.http_port(), address);
  testing::HttpReply reply = remote.Send("POST", "/v2/systemsharedmemory/region/r/register",
                                         RegisterJson(region.key(), 0, 64));
  EXPECT_EQ(reply.status, 200) << reply.body;
}

TEST_F(SharedMemoryTest, ARegionUnregisteredMidRequestStaysMappedUntilTheRequestEnds) {
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=slow"});
  ClientRegion in("mid_in", 8), out("mid_out", 8);
  in.Write(0, std::vector<int64_t>{700});  // slow sleeps that many milliseconds
  ASSERT_TRUE(Register("in", in.key(), 0, 8).ok());
  ASSERT_TRUE(Register("out", out.key(), 0, 8).ok());
  ModelInferRequest request = SlowRequest(0);
  request.clear_raw_input_contents();
  SetRegion(request.mutable_inputs(0)->mutable_parameters(), "in", 8);
  auto* o = request.add_outputs();
  o->set_name("MS");
  SetRegion(o->mutable_parameters(), "out", 8);
  auto running = std::async(std::launch::async, [this, &request] {
    ModelInferResponse response;
    return Infer(request, &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // it is sleeping in the model now
  ASSERT_TRUE(Unregister("").ok());
  inference::SystemSharedMemoryStatusResponse status;
  ASSERT_TRUE(Status("", &status).ok());
  EXPECT_EQ(status.regions_size(), 0);  // the names are gone at once...
  EXPECT_TRUE(ServerMaps(in.key()));    // ...the memory stays mapped for the request
  EXPECT_TRUE(ServerMaps(out.key()));
  grpc::Status s = running.get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.Read<int64_t>(0, 1), (std::vector<int64_t>{700}));  // answered in full
  EXPECT_TRUE(ServerUnmaps(in.key()));  // and unmapped when it ended
  EXPECT_TRUE(ServerUnmaps(out.key()));
  // A new request naming the region is refused.
  ModelInferResponse response;
  s = Infer(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // (Requested outputs are resolved first.)
  EXPECT_NE(s.error_message().find("output 'MS': no system shared memory region named 'out'"),
            std::string::npos)
      << s.error_message();
}

TEST_F(SharedMemoryTest, AViewTheModelKeepsIsItsOwnCopyOnceTheRequestEnds) {
  StartServer({"--allow-client-shm", "--model-control-mode=explicit", "--load-model=keeps_input",
               "--interpreters=1"});
  ClientRegion in("keep_in", 16);
  in.Write(0, std::vector<float>{1, 2, 3, 4});
  ASSERT_TRUE(Register("in", in.key(), 0, 16).ok());
  ModelInferRequest request = FloatRequest("keeps_input", {0, 0, 0, 0});
  request.mutable_inputs(0)->set_name("X");
  request.clear_raw_input_contents();
  SetRegion(request.mutable_inputs(0)->mutable_parameters(), "in", 16);
  ModelInferResponse first, second;
  ASSERT_TRUE(Infer(request, &first).ok());  // the model keeps a view of [1, 2, 3, 4]
  in.Write(0, std::vector<float>{9, 9, 9, 9});  // the client reuses its region at once
  ASSERT_TRUE(Unregister("in").ok());
  EXPECT_TRUE(ServerUnmaps(in.key()));  // the kept tensor holds a copy, not the mapping
  ModelInferRequest raw = FloatRequest("keeps_input", {5, 5, 5, 5});
  raw.mutable_inputs(0)->set_name("X");
  ASSERT_TRUE(Infer(raw, &second).ok());
  EXPECT_EQ(FromRaw<float>(second.raw_output_contents(0)), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace manypy

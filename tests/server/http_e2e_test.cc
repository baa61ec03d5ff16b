// End-to-end over real HTTP: the manypy-server process's KServe v2 REST
// endpoint (JSON and Triton's binary-data extension), every route, results
// equal to gRPC's, keep-alive, concurrent connections and each error code.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

using testing::HttpConnection;
using testing::HttpReply;

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  EXPECT_FALSE(doc.HasParseError()) << text;
  return doc;
}

std::string ErrorOf(const HttpReply& r) {
  auto doc = Parse(r.body);
  return doc.IsObject() && doc.HasMember("error") ? doc["error"].GetString() : "";
}

const char* kTwoIoJson = R"({"id": "request-7", "inputs": [
  {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [[1, 2], [3, 4]]},
  {"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [10, 20, 30, 40]}]})";

class HttpTest : public ServerTest {
 protected:
  // No metrics endpoint unless a test watches the server's gauges.
  void StartServer(std::vector<std::string> args, bool metrics = false) {
    if (!metrics) args.push_back("--no-metrics");
    ServerTest::StartServer(std::move(args));
  }
  int port() const { return server_.http_port(); }
  // Polls the metrics endpoint (up to 10 s) until `series` (name and labels) reads 1.
  bool GaugeReachesOne(const std::string& series) {
    EXPECT_GT(server_.metrics_port(), 0) << "start the server with metrics on";
    for (int i = 0; i < 500; ++i) {
      HttpConnection metrics(server_.metrics_port());  // one connection per scrape
      if (metrics.Send("GET", "/metrics").body.find(series + " 1") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

TEST_F(HttpTest, HealthMetadataConfigStatsAndIndex) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--load-model=resnet18"});
  ASSERT_GT(port(), 0);
  HttpConnection c(port());
  EXPECT_EQ(c.Send("GET", "/v2/health/live").status, 200);
  HttpReply ready = c.Send("GET", "/v2/health/ready");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, R"({"ready":true})");
  auto meta = Parse(c.Send("GET", "/v2").body);
  EXPECT_STREQ(meta["name"].GetString(), "manypy");
  EXPECT_TRUE(meta["extensions"].IsArray());

  for (const char* target : {"/v2/models/resnet18", "/v2/models/resnet18/versions/1"}) {
    HttpReply r = c.Send("GET", target);
    ASSERT_EQ(r.status, 200) << r.body;
    auto m = Parse(r.body);
    EXPECT_STREQ(m["name"].GetString(), "resnet18");
    EXPECT_STREQ(m["versions"][0].GetString(), "1");
    EXPECT_STREQ(m["inputs"][0]["datatype"].GetString(), "FP32");
    ASSERT_EQ(m["inputs"][0]["shape"].Size(), 4u);
    EXPECT_EQ(m["inputs"][0]["shape"][0].GetInt(), -1);  // numbers, not strings
  }
  EXPECT_EQ(c.Send("GET", "/v2/models/resnet18/ready").status, 200);
  EXPECT_EQ(c.Send("GET", "/v2/models/resnet18/versions/1/ready").status, 200);
  EXPECT_EQ(c.Send("GET", "/v2/models/resnet18/versions/9/ready").status, 404);
  EXPECT_EQ(c.Send("GET", "/v2/models/nope/ready").status, 404);

  auto config = Parse(c.Send("GET", "/v2/models/resnet18/config").body);
  EXPECT_EQ(config["max_batch_size"].GetInt(), 8);
  EXPECT_STREQ(config["input"][0]["data_type"].GetString(), "TYPE_FP32");
  EXPECT_TRUE(config.HasMember("dynamic_batching"));
  EXPECT_EQ(config["instance_group"][0]["count"].GetInt(), 2);

  ASSERT_EQ(c.Send("POST", "/v2/models/two_io/infer", kTwoIoJson).status, 200);
  auto stats = Parse(c.Send("GET", "/v2/models/two_io/stats").body);
  ASSERT_EQ(stats["model_stats"].Size(), 1u);
  EXPECT_EQ(stats["model_stats"][0]["inference_count"].GetUint64(), 1u);
  EXPECT_EQ(stats["model_stats"][0]["inference_stats"]["success"]["count"].GetUint64(), 1u);
  auto all = Parse(c.Send("GET", "/v2/models/stats").body);
  EXPECT_EQ(all["model_stats"].Size(), 2u);

  HttpReply index = c.Send("POST", "/v2/repository/index", "{}");
  ASSERT_EQ(index.status, 200);
  auto idx = Parse(index.body);
  ASSERT_TRUE(idx.IsArray());
  bool saw_ready = false;
  for (const auto& m : idx.GetArray()) {
    if (std::string(m["name"].GetString()) == "two_io") saw_ready = m["state"] == "READY";
  }
  EXPECT_TRUE(saw_ready) << index.body;
  auto ready_only = Parse(c.Send("POST", "/v2/repository/index", R"({"ready": true})").body);
  EXPECT_EQ(ready_only.Size(), 2u);

  HttpReply none = c.Send("GET", "/v2/nothing/here");
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(ErrorOf(none).find("no route"), std::string::npos);
  EXPECT_EQ(c.Send("GET", "/v2/models/nope").status, 404);
}

TEST_F(HttpTest, LoadAndUnloadInExplicitMode) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  HttpConnection c(port());
  ASSERT_EQ(c.Send("POST", "/v2/repository/models/two_io/unload").status, 200);
  EXPECT_EQ(c.Send("GET", "/v2/models/two_io/ready").status, 503);  // known, not loaded
  HttpReply load = c.Send("POST", "/v2/repository/models/two_io/load");
  ASSERT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(c.Send("GET", "/v2/models/two_io/ready").status, 200);
  EXPECT_EQ(c.Send("POST", "/v2/repository/models/nope/load").status, 404);
}

TEST_F(HttpTest, LoadNeedsExplicitModeAndIsRefused503AsInTriton) {
  namespace fs = std::filesystem;
  fs::path repo = fs::temp_directory_path() / ("manypy_http_none_" + std::to_string(getpid()));
  fs::create_directories(repo);
  fs::copy_file(fs::path(MANYPY_TEST_REPOSITORY) / "two_io.mpk", repo / "two_io.mpk");
  StartServer({"--model-repository=" + repo.string()});
  HttpConnection c(port());
  HttpReply r = c.Send("POST", "/v2/repository/models/two_io/load");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(ErrorOf(r).find("--model-control-mode=explicit"), std::string::npos) << r.body;
  fs::remove_all(repo);
}

TEST_F(HttpTest, JsonInferenceEqualsGrpc) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  ModelInferResponse grpc_out;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &grpc_out).ok());
  std::vector<float> sum = FromRaw<float>(grpc_out.raw_output_contents(0));
  std::vector<float> product = FromRaw<float>(grpc_out.raw_output_contents(1));

  HttpConnection c(port());
  HttpReply r = c.Send("POST", "/v2/models/two_io/infer", kTwoIoJson);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.inference_header.empty());  // all JSON
  auto doc = Parse(r.body);
  EXPECT_STREQ(doc["id"].GetString(), "request-7");
  EXPECT_STREQ(doc["model_name"].GetString(), "two_io");
  EXPECT_STREQ(doc["model_version"].GetString(), "1");
  ASSERT_EQ(doc["outputs"].Size(), 2u);
  EXPECT_STREQ(doc["outputs"][0]["name"].GetString(), "SUM");
  EXPECT_EQ(doc["outputs"][0]["shape"][0].GetInt(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(doc["outputs"][0]["data"][i].GetDouble(), sum[i]);
    EXPECT_EQ(doc["outputs"][1]["data"][i].GetDouble(), product[i]);
  }

  // One output requested as binary, in the binary-data extension's layout.
  std::string req = R"({"inputs": [
    {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
    {"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [10, 20, 30, 40]}],
    "outputs": [{"name": "PRODUCT", "parameters": {"binary_data": true}}]})";
  r = c.Send("POST", "/v2/models/two_io/versions/1/infer", req);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_FALSE(r.inference_header.empty());
  size_t json = std::stoul(r.inference_header);
  auto head = Parse(r.body.substr(0, json));
  ASSERT_EQ(head["outputs"].Size(), 1u);
  EXPECT_EQ(head["outputs"][0]["parameters"]["binary_data_size"].GetUint(), 16u);
  EXPECT_EQ(FromRaw<float>(r.body.substr(json)), product);
}

TEST_F(HttpTest, BinaryInferenceOnResnet18EqualsGrpc) {
  StartServer({"--model-control-mode=explicit", "--load-model=resnet18"});
  std::vector<float> image(3 * 224 * 224);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : image) f = u(rng);
  ModelInferRequest g;
  g.set_model_name("resnet18");
  auto* in = g.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  for (int64_t d : {1, 3, 224, 224}) in->add_shape(d);
  g.add_raw_input_contents(Raw(image));
  ModelInferResponse grpc_out;
  ASSERT_TRUE(Infer(g, &grpc_out).ok());
  std::vector<float> expected = FromRaw<float>(grpc_out.raw_output_contents(0));

  std::string header = R"({"inputs": [{"name": "INPUT__0", "shape": [1, 3, 224, 224], "datatype": "FP32",
    "parameters": {"binary_data_size": )" + std::to_string(image.size() * 4) + R"(}}],
    "parameters": {"binary_data_output": true}})";
  HttpConnection c(port());
  HttpReply r = c.Send("POST", "/v2/models/resnet18/infer", header + Raw(image),
                       std::to_string(header.size()));
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  size_t json = std::stoul(r.inference_header);
  auto head = Parse(r.body.substr(0, json));
  EXPECT_EQ(head["outputs"][0]["shape"][1].GetInt(), static_cast<int>(expected.size()));
  std::vector<float> got = FromRaw<float>(r.body.substr(json));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4) << i;
}

TEST_F(HttpTest, EveryDatatypeRoundTripsAsJson) {
  StartServer({"--model-control-mode=explicit", "--load-model=echo_all"});
  std::string inputs;
  const std::vector<std::pair<std::string, std::string>> data = {
      {"BOOL", "[true, false]"}, {"UINT8", "[0, 255]"}, {"UINT16", "[0, 65535]"},
      {"UINT32", "[0, 4294967295]"}, {"UINT64", "[0, 9007199254740993]"}, {"INT8", "[-128, 127]"},
      {"INT16", "[-32768, 32767]"}, {"INT32", "[-2147483648, 2147483647]"},
      {"INT64", "[-9007199254740993, 5]"}, {"FP16", "[1.5, -2]"}, {"BF16", "[1.5, -2]"},
      {"FP32", "[0.5, -3.25]"}, {"FP64", "[0.1, 1e300]"}, {"BYTES", R"(["caf\u00e9", ""])"}};
  for (const auto& [dt, values] : data) {
    inputs += std::string(inputs.empty() ? "" : ",") + R"({"name": "IN_)" + dt + R"(", "shape": [2], "datatype": ")" +
              dt + R"(", "data": )" + values + "}";
  }
  HttpConnection c(port());
  HttpReply r = c.Send("POST", "/v2/models/echo_all/infer", "{\"inputs\": [" + inputs + "]}");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = Parse(r.body);
  ASSERT_EQ(doc["outputs"].Size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    auto expected = Parse(data[i].second);
    EXPECT_TRUE(doc["outputs"][i]["data"] == expected) << data[i].first << ": " << r.body;
  }
}

TEST_F(HttpTest, BytesInputsOnTextClassifierEqualGrpc) {
  StartServer({"--model-control-mode=explicit", "--load-model=text_classifier"});
  ModelInferRequest g;
  g.set_model_name("text_classifier");
  auto* in = g.add_inputs();
  in->set_name("TEXT");
  in->set_datatype("BYTES");
  in->add_shape(2);
  in->add_shape(1);
  in->mutable_contents()->add_bytes_contents("a fine day");
  in->mutable_contents()->add_bytes_contents("rain again");
  ModelInferResponse grpc_out;
  ASSERT_TRUE(Infer(g, &grpc_out).ok());
  std::vector<float> expected = FromRaw<float>(grpc_out.raw_output_contents(0));

  HttpConnection c(port());
  HttpReply r = c.Send("POST", "/v2/models/text_classifier/infer",
                       R"({"inputs": [{"name": "TEXT", "shape": [2, 1], "datatype": "BYTES",
                           "data": [["a fine day"], ["rain again"]]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = Parse(r.body);
  const auto& out = doc["outputs"][0]["data"];
  ASSERT_EQ(out.Size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(out[i].GetDouble(), expected[i], 1e-5);
}

TEST_F(HttpTest, BadRequestsAre400WithGrpcsMessages) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  HttpConnection c(port());
  auto expect_400 = [&](const std::string& body, const std::string& text, const std::string& header = "") {
    HttpReply r = c.Send("POST", "/v2/models/two_io/infer", body, header);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(ErrorOf(r).find(text), std::string::npos) << r.body;
    EXPECT_TRUE(r.keep_alive);  // a bad request does not cost the connection
  };
  expect_400("{\"inputs\": [", "the inference request is not valid JSON");
  expect_400("[1, 2]", "must be a JSON object");
  expect_400("{}", "no 'inputs'");
  expect_400(R"({"inputs": [{"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": ["x", 2, 3, 4]}]})",
             "input 'INPUT_A' element 0: FP32 data must be a number");
  expect_400(R"({"inputs": [{"name": "INPUT_A", "shape": "4", "datatype": "FP32", "data": [1]}]})",
             "'shape' must be an array of integers");
  expect_400(R"({"inputs": [{"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3]}]})",
             "has 3 values in 'data', its shape needs 4");
  std::string overrun =
      R"({"inputs": [{"name": "INPUT_A", "shape": [1], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]})";
  expect_400(overrun + "1234", "overruns", std::to_string(overrun.size()));
  expect_400(overrun + "123456789", "add up to 8", std::to_string(overrun.size()));
  // Prepare's own messages, as gRPC gives them.
  ModelInferRequest wrong = TwoIoRequest(true);
  wrong.mutable_inputs(1)->set_datatype("INT32");
  wrong.set_raw_input_contents(1, Raw(std::vector<int32_t>{1, 2, 3, 4}));
  ModelInferResponse ignored;
  grpc::Status g = Infer(wrong, &ignored);
  ASSERT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  expect_400(R"({"inputs": [
    {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
    {"name": "INPUT_B", "shape": [4], "datatype": "INT32", "data": [1, 2, 3, 4]}]})",
             g.error_message());
  expect_400(R"({"inputs": [{"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})",
             "expects 2 input(s)");
  // The binary header longer than the body.
  expect_400("{}", "exceeds the body", "100");
  expect_400(R"({"inputs": [], "outputs": [{"name": "NOPE"}]})", "has no output named 'NOPE'");
}

TEST_F(HttpTest, ErrorsMapToTheirCodes) {
  StartServer({"--model-control-mode=explicit", "--load-model=failing", "--load-model=slow",
               "--model-config=slow:instance_count=1", "--model-config=slow:max_queue_size=1",
               "--max-message-size=100000"},
              /*metrics=*/true);
  HttpConnection c(port());
  HttpReply r = c.Send("POST", "/v2/models/nope/infer", "{\"inputs\": []}");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(ErrorOf(r).find("nope"), std::string::npos);
  r = c.Send("POST", "/v2/models/failing/infer",
             R"({"inputs": [{"name": "INPUT__0", "shape": [1], "datatype": "FP32", "data": [-1]}]})");
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(ErrorOf(r).find("negative input is not allowed"), std::string::npos) << r.body;

  // 413: a body over --max-message-size is refused before it is read.
  HttpConnection big(port());
  big.WriteRaw("POST /v2/models/failing/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n");
  std::string reply = big.ReadAll();
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;

  // 429 and 504: one slow call runs, one waits in the queue of one, the next is refused;
  // a request whose timeout passes while queued is not run. Each step waits for the
  // server's own gauges rather than for a guessed time, so a loaded machine cannot
  // reorder them.
  ASSERT_GT(server_.metrics_port(), 0);
  auto slow = [](int ms, const std::string& params = "") {
    return R"({"inputs": [{"name": "MS", "shape": [1, 1], "datatype": "INT64", "data": [)" +
           std::to_string(ms) + "]}]" + params + "}";
  };
  std::thread running([&] {
    HttpConnection own(port());
    EXPECT_EQ(own.Send("POST", "/v2/models/slow/infer", slow(4000)).status, 200);
  });
  EXPECT_TRUE(GaugeReachesOne(R"(manypy_in_flight_executions{model="slow",version="1"})"));
  std::thread queued([&] {
    HttpConnection own(port());
    HttpReply q = own.Send("POST", "/v2/models/slow/infer", slow(1, R"(, "parameters": {"timeout": 2000000})"));
    EXPECT_EQ(q.status, 504) << q.body;
  });
  EXPECT_TRUE(GaugeReachesOne(R"(manypy_queued_requests{model="slow",version="1"})"));
  r = c.Send("POST", "/v2/models/slow/infer", slow(1));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_NE(ErrorOf(r).find("max_queue_size 1"), std::string::npos) << r.body;
  running.join();
  queued.join();
}

TEST_F(HttpTest, KeepAliveConcurrentConnectionsAndSlowClients) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  // A client that sends half a request holds only its own connection.
  HttpConnection stalled(port());
  stalled.WriteRaw("POST /v2/models/two_io/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"in");
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      HttpConnection c(port());  // 20 requests on one keep-alive connection each
      for (int i = 0; i < 20; ++i) {
        HttpReply r = c.Send("POST", "/v2/models/two_io/infer", kTwoIoJson);
        if (r.status == 200 && r.keep_alive) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 160);
  // Garbage is answered 400 and the connection closed.
  HttpConnection garbage(port());
  garbage.WriteRaw("THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(garbage.ReadAll().rfind("HTTP/1.1 400", 0), 0u);
}

TEST_F(HttpTest, ReadinessTurnsFalseOnSigterm) {
  StartServer({"--model-control-mode=explicit", "--load-model=slow", "--grace-period=5"},
              /*metrics=*/true);
  HttpConnection c(port());
  std::thread running([&] {
    HttpConnection own(port());
    HttpReply r = own.Send("POST", "/v2/models/slow/infer",
                           R"({"inputs": [{"name": "MS", "shape": [1, 1], "datatype": "INT64", "data": [1500]}]})");
    EXPECT_EQ(r.status, 200) << r.body;  // in flight at SIGTERM: still answered
  });
  EXPECT_TRUE(GaugeReachesOne(R"(manypy_in_flight_executions{model="slow",version="1"})"));
  kill(server_.pid(), SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  HttpReply ready = c.Send("GET", "/v2/health/ready");
  EXPECT_EQ(ready.status, 503);
  running.join();
}

}  // namespace
}  // namespace manypy

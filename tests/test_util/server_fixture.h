// ServerTest: a fixture that starts the real manypy-server on a loopback port
// and talks to it with the protocol's generated gRPC stubs; raw-contents
// helpers. For end-to-end tests only.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "proto/grpc_service.grpc.pb.h"
#include "tests/test_util/server_process.h"

namespace manypy {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> args) {
    // Two interpreters unless the test asks for another number.
    if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
          return a.rfind("--interpreters", 0) == 0;
        })) {
      args.push_back("--interpreters=2");
    }
    if (std::find_if(args.begin(), args.end(), [](const std::string& a) {
          return a.rfind("--model-repository", 0) == 0;
        }) == args.end()) {
      args.push_back(std::string("--model-repository=") + MANYPY_TEST_REPOSITORY);
    }
    ASSERT_TRUE(server_.Start(MANYPY_SERVER_BINARY, args)) << "server did not start";
    channel_ = grpc::CreateChannel(server_.address(), grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }
  /// A fresh folder TMP/<prefix>_<pid>_<test name>/ holding repository/ with
  /// `archives` (paths under the test repository) copied in, flat; the
  /// server's stderr goes to its server.log. The caller removes it.
  std::filesystem::path RepositoryOfTheTest(const std::string& prefix,
                                            std::initializer_list<const char*> archives) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() /
                   (prefix + "_" + std::to_string(getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "repository");
    for (const char* a : archives) {
      fs::copy_file(fs::path(MANYPY_TEST_REPOSITORY) / a, dir / "repository" / fs::path(a).filename());
    }
    server_.set_stderr_path((dir / "server.log").string());
    return dir;
  }
  void TearDown() override {
    if (server_.pid() > 0) {
      EXPECT_EQ(server_.Stop(), 0);
    }
  }

  grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse* response,
                     int deadline_ms = 30000) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    return stub_->ModelInfer(&ctx, request, response);
  }
  /// RepositoryModelLoad / RepositoryModelUnload of `name` (explicit mode).
  grpc::Status LoadModel(const std::string& name) {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest request;
    request.set_model_name(name);
    inference::RepositoryModelLoadResponse response;
    return stub_->RepositoryModelLoad(&ctx, request, &response);
  }
  grpc::Status UnloadModel(const std::string& name) {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name(name);
    inference::RepositoryModelUnloadResponse response;
    return stub_->RepositoryModelUnload(&ctx, request, &response);
  }
  /// The statistics of `model` (empty when the server has none for it).
  inference::ModelStatistics Statistics(const std::string& model) {
    grpc::ClientContext ctx;
    inference::ModelStatisticsRequest request;
    request.set_name(model);
    inference::ModelStatisticsResponse response;
    EXPECT_TRUE(stub_->ModelStatistics(&ctx, request, &response).ok());
    return response.model_stats_size() > 0 ? response.model_stats(0) : inference::ModelStatistics();
  }

  testing::ServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

template <typename T>
std::string Raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> FromRaw(const std::string& raw) {
  std::vector<T> v(raw.size() / sizeof(T));
  memcpy(v.data(), raw.data(), v.size() * sizeof(T));
  return v;
}

/// two_io's inputs [1,2,3,4] and [10,20,30,40], raw or typed.
/// One FP32 input INPUT__0 of shape [n] (the fault, streaming and
/// composition test models take it).
inline ModelInferRequest FloatRequest(const std::string& model, const std::vector<float>& values) {
  ModelInferRequest r;
  r.set_model_name(model);
  auto* in = r.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  in->add_shape(static_cast<int64_t>(values.size()));
  r.add_raw_input_contents(Raw(values));
  return r;
}

inline ModelInferRequest TwoIoRequest(bool raw) {
  ModelInferRequest r;
  r.set_model_name("two_io");
  r.set_id("request-7");
  auto* a = r.add_inputs();
  a->set_name("INPUT_A");
  a->set_datatype("FP32");
  a->add_shape(4);
  auto* b = r.add_inputs();
  b->set_name("INPUT_B");
  b->set_datatype("INT64");
  b->add_shape(4);
  if (raw) {
    r.add_raw_input_contents(Raw(std::vector<float>{1, 2, 3, 4}));
    r.add_raw_input_contents(Raw(std::vector<int64_t>{10, 20, 30, 40}));
  } else {
    for (float f : {1.f, 2.f, 3.f, 4.f}) a->mutable_contents()->add_fp32_contents(f);
    for (int64_t i : {10, 20, 30, 40}) b->mutable_contents()->add_int64_contents(i);
  }
  return r;
}

/// A request to the test model `slow`, which sleeps `ms` milliseconds.
inline ModelInferRequest SlowRequest(int64_t ms, const std::string& id = "") {
  ModelInferRequest r;
  r.set_model_name("slow");
  r.set_id(id);
  auto* in = r.add_inputs();
  in->set_name("MS");
  in->set_datatype("INT64");
  in->add_shape(1);
  in->add_shape(1);
  r.add_raw_input_contents(Raw(std::vector<int64_t>{ms}));
  return r;
}

}  // namespace manypy

// End-to-end: the real manypy-server process on a loopback port, driven with
// the protocol's generated gRPC stubs, as any KServe v2 / Triton client would.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "proto/grpc_service.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;


TEST_F(ServerTest, HealthMetadataConfigIndexAndStatistics) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--load-model=resnet18"});
  grpc::ClientContext c1, c2, c3, c4, c5, c6, c7, c8;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ServerMetadataResponse meta;
  ASSERT_TRUE(stub_->ServerMetadata(&c3, {}, &meta).ok());
  EXPECT_EQ(meta.name(), "manypy");

  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest hreq;
  grpc::health::v1::HealthCheckResponse hresp;
  ASSERT_TRUE(health->Check(&c4, hreq, &hresp).ok());
  EXPECT_EQ(hresp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  {
    grpc::ClientContext wctx;
    hreq.set_service("inference.GRPCInferenceService");
    auto watch = health->Watch(&wctx, hreq);
    ASSERT_TRUE(watch->Read(&hresp));
    EXPECT_EQ(hresp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    wctx.TryCancel();
  }

  inference::ModelReadyRequest mr;
  mr.set_name("resnet18");
  inference::ModelReadyResponse mready;
  ASSERT_TRUE(stub_->ModelReady(&c5, mr, &mready).ok());
  EXPECT_TRUE(mready.ready());

  inference::ModelMetadataRequest mmr;
  mmr.set_name("resnet18");
  inference::ModelMetadataResponse mm;
  ASSERT_TRUE(stub_->ModelMetadata(&c6, mmr, &mm).ok());
  ASSERT_EQ(mm.inputs_size(), 1);
  EXPECT_EQ(mm.inputs(0).datatype(), "FP32");
  EXPECT_EQ(mm.inputs(0).shape_size(), 4);  // [-1, 3, 224, 224]
  EXPECT_EQ(mm.inputs(0).shape(0), -1);
  EXPECT_EQ(mm.versions(0), "1");

  inference::ModelConfigRequest cr;
  cr.set_name("resnet18");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&c7, cr, &config).ok());
  EXPECT_EQ(config.config().max_batch_size(), 8);
  EXPECT_EQ(config.config().input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(config.config().input(0).dims_size(), 3);
  EXPECT_TRUE(config.config().has_dynamic_batching());
  EXPECT_EQ(config.config().instance_group(0).count(), 2);

  inference::RepositoryIndexRequest ir;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&c8, ir, &index).ok());
  int ready_models = 0;
  bool saw_unloaded_resnet50 = false;
  for (const auto& m : index.models()) {
    ready_models += m.state() == "READY";
    saw_unloaded_resnet50 |= m.name() == "resnet50" && m.state() == "UNAVAILABLE";
  }
  EXPECT_EQ(ready_models, 2);
  EXPECT_TRUE(saw_unloaded_resnet50);

  ModelInferResponse out;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &out).ok());
  grpc::ClientContext c9;
  inference::ModelStatisticsRequest sr;
  sr.set_name("two_io");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub_->ModelStatistics(&c9, sr, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 1u);
  EXPECT_GT(stats.model_stats(0).inference_stats().compute_infer().ns(), 0u);
}

TEST_F(ServerTest, InferTypedAndRawWithRequestedOutputs) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  for (bool raw : {false, true}) {
    ModelInferResponse out;
    grpc::Status s = Infer(TwoIoRequest(raw), &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(out.id(), "request-7");
    EXPECT_EQ(out.model_version(), "1");
    ASSERT_EQ(out.outputs_size(), 2);
    EXPECT_EQ(out.outputs(0).name(), "SUM");
    ASSERT_EQ(out.raw_output_contents_size(), 2);
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{11, 22, 33, 44}));
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(1)), (std::vector<float>{10, 40, 90, 160}));
  }
  // A subset, in the requested order, as typed contents.
  ModelInferRequest r = TwoIoRequest(true);
  auto* o = r.add_outputs();
  o->set_name("PRODUCT");
  (*o->mutable_parameters())["binary_data"].set_bool_param(false);
  ModelInferResponse out;
  ASSERT_TRUE(Infer(r, &out).ok());
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).name(), "PRODUCT");
  EXPECT_EQ(out.raw_output_contents_size(), 0);
  ASSERT_EQ(out.outputs(0).contents().fp32_contents_size(), 4);
  EXPECT_EQ(out.outputs(0).contents().fp32_contents(3), 160.f);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(ServerTest, ResultsEqualEagerPyTorch) {
  StartServer({"--model-control-mode=explicit", "--load-model=resnet18"});
  // The reference: the model built from its source and run eagerly by Debian's Python.
  fs::path dir = fs::temp_directory_path() / ("manypy_eager_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string cmd = std::string("cd ") + MANYPY_SOURCE_DIR +
                    " && PYTHONPATH=models /usr/bin/python3 -c \"import torch, resnet18 as m\n"
                    "x, = m.example_inputs(2)\nwith torch.inference_mode(): y = m.build()(x)\n"
                    "open('" + (dir / "in").string() + "', 'wb').write(x.numpy().tobytes())\n"
                    "open('" + (dir / "out").string() + "', 'wb').write(y.numpy().tobytes())\"";
  ASSERT_EQ(system(cmd.c_str()), 0);
  ModelInferRequest r;
  r.set_model_name("resnet18");
  auto* in = r.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  for (int64_t d : {2, 3, 224, 224}) in->add_shape(d);
  r.add_raw_input_contents(ReadFile((dir / "in").string()));
  ModelInferResponse out;
  grpc::Status s = Infer(r, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<float> got = FromRaw<float>(out.raw_output_contents(0));
  std::vector<float> want = FromRaw<float>(ReadFile((dir / "out").string()));
  ASSERT_EQ(got.size(), 2000u);
  ASSERT_EQ(want.size(), 2000u);
  // Tolerance: the server may use another intra-op thread count, which reorders float sums.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::abs(want[i]));
  fs::remove_all(dir);
}

TEST_F(ServerTest, EveryDatatypeRoundTrips) {
  StartServer({"--model-control-mode=explicit", "--load-model=echo_all"});
  const std::vector<std::string> types = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64",
                                          "INT8", "INT16", "INT32", "INT64", "FP16",
                                          "BF16", "FP32", "FP64", "BYTES"};
  ModelInferRequest r;
  r.set_model_name("echo_all");
  std::vector<std::string> sent;
  for (const auto& t : types) {
    auto* in = r.add_inputs();
    in->set_name("IN_" + t);
    in->set_datatype(t);
    in->add_shape(3);
    std::string raw;
    if (t == "BYTES") {
      for (std::string s : {"a", "", "\xff\x00z"}) {
        uint32_t n = static_cast<uint32_t>(s.size());
        raw.append(reinterpret_cast<char*>(&n), 4).append(s);
      }
    } else if (t == "BOOL") {
      raw = std::string("\x01\x00\x01", 3);
    } else {
      size_t width = t == "FP16" || t == "BF16" || t == "UINT16" || t == "INT16" ? 2
                     : t == "UINT8" || t == "INT8"                               ? 1
                     : t == "UINT32" || t == "INT32" || t == "FP32"              ? 4
                                                                                 : 8;
      for (size_t i = 0; i < 3 * width; ++i) raw.push_back(static_cast<char>(i % width == 0 ? i + 1 : 0));
      if (t == "UINT64") raw[8 * 2 + 7] = 0x7f;  // large but representable in int64
    }
    sent.push_back(raw);
    r.add_raw_input_contents(raw);
  }
  ModelInferResponse out;
  grpc::Status s = Infer(r, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(out.outputs_size(), static_cast<int>(types.size()));
  for (size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(out.outputs(i).datatype(), types[i]);
    EXPECT_EQ(out.raw_output_contents(i), sent[i]) << types[i];
  }
  // Typed contents where the protocol has a field for the type.
  ModelInferRequest typed;
  typed.set_model_name("echo_all");
  for (const auto& t : types) {
    auto* in = typed.add_inputs();
    in->set_name("IN_" + t);
    in->set_datatype(t);
    in->add_shape(2);
    auto* c = in->mutable_contents();
    if (t == "BOOL") { c->add_bool_contents(true); c->add_bool_contents(false); }
    else if (t == "INT8" || t == "INT16" || t == "INT32") { c->add_int_contents(-3); c->add_int_contents(5); }
    else if (t == "INT64") { c->add_int64_contents(-3); c->add_int64_contents(5); }
    else if (t == "UINT8" || t == "UINT16" || t == "UINT32") { c->add_uint_contents(3); c->add_uint_contents(5); }
    else if (t == "UINT64") { c->add_uint64_contents(3); c->add_uint64_contents(5); }
    else if (t == "FP32") { c->add_fp32_contents(1.5f); c->add_fp32_contents(-2.f); }
    else if (t == "FP64") { c->add_fp64_contents(1.5); c->add_fp64_contents(-2.0); }
    else if (t == "BYTES") { c->add_bytes_contents("x"); c->add_bytes_contents("yz"); }
    else { in->clear_contents(); }
  }
  // FP16 / BF16 have no typed field: the request must say so clearly.
  ModelInferResponse typed_out;
  grpc::Status ts = Infer(typed, &typed_out);
  EXPECT_EQ(ts.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(ts.error_message().find("FP16"), std::string::npos) << ts.error_message();
}

TEST_F(ServerTest, ErrorsCarryTheRightCodeAndNameTheProblem) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--load-model=failing",
               "--max-message-size=1048576"});
  auto expect = [&](ModelInferRequest r, grpc::StatusCode code, const std::string& words) {
    ModelInferResponse out;
    grpc::Status s = Infer(r, &out);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  };
  ModelInferRequest r = TwoIoRequest(true);
  r.set_model_name("no_such_model");
  expect(r, grpc::StatusCode::NOT_FOUND, "no_such_model");
  r = TwoIoRequest(true);
  r.set_model_version("9");
  expect(r, grpc::StatusCode::NOT_FOUND, "version '9'");
  r = TwoIoRequest(true);
  r.mutable_inputs(1)->set_name("INPUT_C");
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "INPUT_C");
  r = TwoIoRequest(true);
  r.mutable_inputs()->RemoveLast();
  r.mutable_raw_input_contents()->RemoveLast();
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "expects 2 input");
  r = TwoIoRequest(true);
  r.mutable_inputs(0)->set_shape(0, 5);
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "shape [5]");
  r = TwoIoRequest(true);
  r.mutable_inputs(0)->set_datatype("FP64");
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "datatype FP64");
  r = TwoIoRequest(true);
  r.set_raw_input_contents(0, "abc");
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "3 bytes");

  ModelInferRequest f;
  f.set_model_name("failing");
  auto* in = f.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  in->add_shape(2);
  f.add_raw_input_contents(Raw(std::vector<float>{1, -1}));
  expect(f, grpc::StatusCode::INTERNAL, "ValueError: negative input is not allowed");
  // The model still serves afterwards.
  f.set_raw_input_contents(0, Raw(std::vector<float>{1, 2}));
  ModelInferResponse ok;
  EXPECT_TRUE(Infer(f, &ok).ok());

  ModelInferRequest big = TwoIoRequest(true);
  big.set_id(std::string(2 << 20, 'x'));
  expect(big, grpc::StatusCode::RESOURCE_EXHAUSTED, "");

  // Regression: a failed load of a name the repository lacks left a phantom
  // entry, and later calls answered UNAVAILABLE instead of NOT_FOUND.
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("ghost");
    inference::RepositoryModelLoadResponse loaded;
    EXPECT_EQ(stub_->RepositoryModelLoad(&ctx, load, &loaded).error_code(), grpc::StatusCode::NOT_FOUND);
    ModelInferRequest ghost = TwoIoRequest(true);
    ghost.set_model_name("ghost");
    expect(ghost, grpc::StatusCode::NOT_FOUND, "ghost");
  }

  // Unloaded: not ready.
  grpc::ClientContext ctx;
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("two_io");
  inference::RepositoryModelUnloadResponse unloaded;
  ASSERT_TRUE(stub_->RepositoryModelUnload(&ctx, unload, &unloaded).ok());
  expect(TwoIoRequest(true), grpc::StatusCode::UNAVAILABLE, "not ready");
}


TEST_F(ServerTest, ExpiredDeadlineIsNotRun) {
  StartServer({"--model-control-mode=explicit", "--load-model=slow", "--interpreters=1"});
  // One interpreter: the first slow request runs, the second waits, the third
  // waits past its deadline.
  std::vector<std::thread> busy;
  for (int i = 0; i < 2; ++i) {
    busy.emplace_back([&] {
      ModelInferResponse out;
      EXPECT_TRUE(Infer(SlowRequest(1500), &out).ok());
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ModelInferResponse out;
  grpc::Status s = Infer(SlowRequest(1), &out, 300);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  for (auto& t : busy) t.join();
  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest sr;
  sr.set_name("slow");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub_->ModelStatistics(&ctx, sr, &stats).ok());
  EXPECT_EQ(stats.model_stats(0).execution_count(), 2u);  // the expired one never ran
}

TEST_F(ServerTest, StreamingAnswersEveryRequest) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--load-model=failing"});
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  for (int i = 0; i < 10; ++i) {
    ModelInferRequest r = TwoIoRequest(i % 2 == 0);
    r.set_id("s" + std::to_string(i));
    if (i == 5) r.set_model_name("no_such_model");
    ASSERT_TRUE(stream->Write(r));
  }
  stream->WritesDone();
  inference::ModelStreamInferResponse response;
  int answered = 0, errors = 0;
  while (stream->Read(&response)) {
    ++answered;
    if (!response.error_message().empty()) {
      ++errors;
      EXPECT_EQ(response.infer_response().id(), "s5");
      EXPECT_NE(response.error_message().find("no_such_model"), std::string::npos);
    } else {
      EXPECT_EQ(FromRaw<float>(response.infer_response().raw_output_contents(0))[3], 44.f);
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, 10);
  EXPECT_EQ(errors, 1);
}

TEST_F(ServerTest, LoadUnloadAndReloadUnderTrafficFailNoRequest) {
  fs::path repo = fs::temp_directory_path() / ("manypy_reload_" + std::to_string(getpid()));
  fs::create_directories(repo);
  fs::copy_file(std::string(MANYPY_TEST_REPOSITORY) + "/two_io.mpk", repo / "two_io.mpk");
  fs::copy_file(std::string(MANYPY_TEST_REPOSITORY) + "/failing.mpk", repo / "failing.mpk");
  StartServer({"--model-control-mode=explicit", "--load-model=two_io",
               "--model-repository=" + repo.string()});
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      while (!stop) {
        ModelInferResponse out;
        if (Infer(TwoIoRequest(true), &out).ok()) {
          ok++;
        } else {
          failed++;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Version 2 of the same model appears in the repository; reload it.
  std::string v2 = repo / "two_io_v2.mpk";
  std::string cmd = std::string("cd ") + MANYPY_SOURCE_DIR +
                    " && PYTHONPATH=package_format/python:models /usr/bin/python3 -c \""
                    "import manypy.package, two_io as m; "
                    "manypy.package.export(m.build(), '" + v2 + "', name='two_io', version=2, **m.SIGNATURE)\"";
  ASSERT_EQ(system(cmd.c_str()), 0);
  // Reload (twice: the second finds the same newest version), then load and
  // unload another model, all while two_io serves traffic.
  for (int round = 0; round < 2; ++round) {
    grpc::Status s = LoadModel("two_io");
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_TRUE(LoadModel("failing").ok());
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name("failing");
    inference::RepositoryModelUnloadResponse response;
    ASSERT_TRUE(stub_->RepositoryModelUnload(&ctx, request, &response).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 0);
  ModelInferResponse out;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &out).ok());
  EXPECT_EQ(out.model_version(), "2");
  fs::remove_all(repo);
}

TEST_F(ServerTest, ModeNoneLoadsEveryModelAndRefusesRepositoryChanges) {
  fs::path repo = fs::temp_directory_path() / ("manypy_mode_none_" + std::to_string(getpid()));
  fs::create_directories(repo);
  for (const char* model : {"two_io.mpk", "failing.mpk"}) {
    fs::copy_file(fs::path(MANYPY_TEST_REPOSITORY) / model, repo / model);
  }
  StartServer({"--model-repository=" + repo.string()});
  ModelInferResponse out;
  EXPECT_TRUE(Infer(TwoIoRequest(true), &out).ok());
  grpc::ClientContext ctx;
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("two_io");
  inference::RepositoryModelUnloadResponse unloaded;
  grpc::Status s = stub_->RepositoryModelUnload(&ctx, unload, &unloaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);  // as Triton answers
  EXPECT_NE(s.error_message().find("--model-control-mode=explicit"), std::string::npos);
  grpc::ClientContext ctx2;
  inference::RepositoryIndexRequest ir;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&ctx2, ir, &index).ok());
  ASSERT_EQ(index.models_size(), 2);
  for (const auto& m : index.models()) EXPECT_EQ(m.state(), "READY") << m.name();
  fs::remove_all(repo);
}

TEST_F(ServerTest, StartLogNamesTheBlasAndTcmallocWhichTheProcessUses) {
  std::string log = (fs::path(::testing::TempDir()) / "start_log.txt").string();
  server_.set_stderr_path(log);
  StartServer({"--model-control-mode=explicit", "--log-level=info"});
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("math: BLAS OpenBLAS"), std::string::npos) << text;
#if !MANYPY_TEST_TCMALLOC
  // Built with -DMANYPY_TCMALLOC=OFF (the sanitizer builds): the log names the
  // malloc that does serve the process, not tcmalloc.
  EXPECT_NE(text.find("memory: the malloc of"), std::string::npos) << text;
  return;
#endif
  // tcmalloc must serve malloc itself, not merely be mapped: MallocName checks
  // that malloc resolves into it. Mapped is checked too, from outside.
  EXPECT_NE(text.find("memory: tcmalloc (gperftools "), std::string::npos) << text;
  std::ifstream maps("/proc/" + std::to_string(server_.serving_pid()) + "/maps");
  std::string mapped((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  EXPECT_NE(mapped.find("libtcmalloc_minimal.so"), std::string::npos);
}

TEST_F(ServerTest, SigtermAnswersRequestsInFlightThenExitsZero) {
  StartServer({"--model-control-mode=explicit", "--load-model=slow"});
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      ModelInferResponse out;
      grpc::Status s = Infer(SlowRequest(800, "r" + std::to_string(i)), &out);
      if (s.ok()) ok++;
      else {
        ADD_FAILURE() << s.error_message();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server_.Stop(), 0);
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 4);
}

}  // namespace
}  // namespace manypy

// manypy-bench-bare-grpc-server: gRPC's own floor for `make bench-overhead`.
// A GRPCInferenceService on the server's generated code and the server's gRPC
// API style (the callback API, the default health service on, tcmalloc) whose
// ModelInfer answers at once on the thread that received it: every raw input
// echoed as an output of the same shape (an identity with no model, no queue,
// no decoding into tensors). ModelMetadata answers one FP32 input INPUT__0 of
// shape [-1, FEATURES] and one output OUTPUT__0, so manypy-perf can call it as
// it calls the served identity model. Thread-safe: no state of its own.
//
// Usage: manypy-bench-bare-grpc-server [--port N] [--features N]
// Prints "listening on 127.0.0.1:PORT" once it serves; runs until killed.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "proto/grpc_service.grpc.pb.h"

namespace {

class BareService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit BareService(int64_t features) : features_(features) {}

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    response->set_name(request->name());
    response->add_versions("1");
    response->set_platform("python");
    for (auto* tensor : {response->add_inputs(), response->add_outputs()}) {
      tensor->set_datatype("FP32");
      tensor->add_shape(-1);
      tensor->add_shape(features_);
    }
    response->mutable_inputs(0)->set_name("INPUT__0");
    response->mutable_outputs(0)->set_name("OUTPUT__0");
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // What a server answering with no work of its own between gRPC's read and
  // write does: the response's header and the inputs' bytes copied back.
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    response->set_model_name(request->model_name());
    response->set_model_version("1");
    response->set_id(request->id());
    for (int i = 0; i < request->inputs_size(); ++i) {
      const auto& in = request->inputs(i);
      auto* out = response->add_outputs();
      out->set_name("OUTPUT__" + std::to_string(i));
      out->set_datatype(in.datatype());
      *out->mutable_shape() = in.shape();
      if (i < request->raw_input_contents_size()) {
        response->add_raw_output_contents(request->raw_input_contents(i));
      }
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const int64_t features_;
};

[[noreturn]] void Usage(const std::string& why) {
  fprintf(stderr, "manypy-bench-bare-grpc-server: %s\nusage: manypy-bench-bare-grpc-server "
          "[--port N] [--features N]\n", why.c_str());
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int64_t features = 16;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    if (flag == "--port") {
      port = std::atoi(argv[++i]);
    } else if (flag == "--features") {
      features = std::atoll(argv[++i]);
    } else {
      Usage("unknown flag " + flag);
    }
  }
  if (port < 0 || features <= 0) Usage("--port >= 0 and --features > 0");
  BareService service(features);
  // As manypy-server: the default health service (a callback service too).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) Usage("cannot listen on 127.0.0.1:" + std::to_string(port));
  printf("listening on 127.0.0.1:%d\n", bound);
  fflush(stdout);
  server->Wait();
  return 0;
}

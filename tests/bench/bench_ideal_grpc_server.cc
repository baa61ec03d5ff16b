// manypy-bench-ideal-grpc-server: the best request path a server built on
// this gRPC could have, for `make bench-overhead`'s "ideal" sides. A
// GRPCInferenceService on the server's generated code whose ModelInfer does
// only what any server must: decodes the request's inputs (the server's own
// DecodeInputs), calls one archive's model through the pool on the thread
// that received the call (PythonModel::Run, the call
// manypy-bench-overhead-pool makes: no dispatcher, no queue, no hand-off to a
// worker, no statistics, no metrics, no access log) and answers with its
// outputs (the server's own EncodeOutputs). Whatever manypy-server spends
// beyond this binary on the same model and load is its design's cost; what
// this binary spends beyond the pool is gRPC's, the kernel's and the model
// running beside them.
//
// Two gRPC API styles (--api):
//   callback  the bare server's and manypy-server's: gRPC's callback threads
//             read each call and run it in the method handler; each thread
//             takes an interpreter of its own (round robin on first use; a
//             thread beyond the pool's size shares one, waiting for it), the
//             default health service on, as in manypy-server;
//   async     the asynchronous API: --threads threads of ours (default: one
//             per interpreter) poll one completion queue, each running every
//             call it takes to completion on its own interpreter (read,
//             decode, model, encode, Finish) before taking the next. Every
//             method is asynchronous and no health service is registered, so
//             gRPC starts no callback thread to read calls beside them.
//
// Only ModelInfer and ModelMetadata are served, and ModelConfig (which
// manypy-perf asks for too) answers UNIMPLEMENTED, as the bare server's does;
// a call naming another model is NOT_FOUND, a bad input INVALID_ARGUMENT with
// the decoder's message, a model's failure its status. With --api async every
// other method waits unanswered until the caller's deadline (the asynchronous
// API answers only the methods it is asked to take).
//
// Usage: manypy-bench-ideal-grpc-server --archive PATH [--interpreters N]
//            [--api callback|async] [--threads N] [--port N]
// Prints "listening on 127.0.0.1:PORT" once warm and serving; runs until killed.
// Threads: the model and the cached metadata are constant once serving; each
// call's state belongs to the one thread running it.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "interpreters/pool.h"
#include "interpreters/thread_policy.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/core/manifest_metadata.h"
#include "server/grpc/grpc_status.h"
#include "server/inference/executable.h"
#include "server/inference/input_decoder.h"
#include "server/inference/output_encoder.h"
#include "server/lifecycle/python_model.h"
#include "server/lifecycle/warmup.h"

namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelMetadataRequest;
using inference::ModelMetadataResponse;

// What either API style does with a call: the same code, so that the two
// differ only in which thread reads, runs and answers it.
class ModelCall {
 public:
  explicit ModelCall(manypy::PythonModel* model) : model_(model) {
    manypy::FillManifestMetadata(model->manifest(), &metadata_);
  }

  grpc::Status Metadata(const ModelMetadataRequest& request, ModelMetadataResponse* response) const {
    if (request.name() != metadata_.name()) return UnknownModel(request.name());
    *response = metadata_;
    return grpc::Status::OK;
  }

  // Decode, the model on interpreter `slot`, encode: nothing else.
  grpc::Status Infer(size_t slot, manypy::InterruptHook* hook, const ModelInferRequest& request,
                     ModelInferResponse* response) const {
    if (request.model_name() != metadata_.name()) return UnknownModel(request.model_name());
    const manypy::Manifest& manifest = model_->manifest();
    std::vector<manypy::Value> inputs;
    manypy::SharedMemoryViews views;  // stays empty: no shared-memory regions here
    manypy::Status decoded = manypy::DecodeInputs(request, manifest, nullptr, &inputs, &views);
    if (!decoded.ok()) return manypy::ToGrpcStatus(decoded);
    auto outputs = model_->Run(slot, inputs, hook);
    if (!outputs.ok()) return manypy::ToGrpcStatus(outputs.status());
    response->set_model_name(request.model_name());
    response->set_model_version(std::to_string(manifest.version));
    response->set_id(request.id());
    return manypy::ToGrpcStatus(manypy::EncodeOutputs(*outputs, manifest, request, nullptr, response));
  }

 private:
  static grpc::Status UnknownModel(const std::string& name) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "manypy-bench-ideal-grpc-server serves one model; '" + name + "' is not it");
  }

  manypy::PythonModel* const model_;
  ModelMetadataResponse metadata_;
};

// --api callback: the handler runs on the gRPC callback thread that read the call.
class CallbackIdeal final : public inference::GRPCInferenceService::CallbackService {
 public:
  CallbackIdeal(const ModelCall* call, size_t interpreters) : call_(call), interpreters_(interpreters) {}

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const ModelMetadataRequest* request,
                                          ModelMetadataResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(call_->Metadata(*request, response));
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const ModelInferRequest* request,
                                       ModelInferResponse* response) override {
    // gRPC's callback threads are few and long-lived: each keeps the
    // interpreter it took first, as a worker does.
    thread_local size_t slot = next_slot_.fetch_add(1, std::memory_order_relaxed) % interpreters_;
    thread_local manypy::InterruptHook hook;
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(call_->Infer(slot, &hook, *request, response));
    return reactor;
  }

 private:
  const ModelCall* const call_;
  const size_t interpreters_;
  std::atomic<size_t> next_slot_{0};
};

// --api async: one call's state, from its request to its Finish's completion.
// Owned by the completion queue's tag until that completion deletes it.
class AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  // `ok`: the completion queue's verdict on this call's pending operation.
  virtual void Proceed(bool ok, size_t slot, manypy::InterruptHook* hook) = 0;
};

template <typename Request, typename Response>
class AsyncUnary final : public AsyncCall {
 public:
  using Handler = grpc::Status (*)(const ModelCall&, size_t, manypy::InterruptHook*, const Request&,
                                   Response*);
  using Requester = void (inference::GRPCInferenceService::AsyncService::*)(
      grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);

  // Asks gRPC for the next call of this method on `cq`.
  static void Await(inference::GRPCInferenceService::AsyncService* service,
                    grpc::ServerCompletionQueue* cq, const ModelCall* call, Requester requester,
                    Handler handler) {
    auto* next = new AsyncUnary(service, cq, call, requester, handler);
    (service->*requester)(&next->ctx_, &next->request_, &next->writer_, cq, cq, next);
  }

  void Proceed(bool ok, size_t slot, manypy::InterruptHook* hook) override {
    if (answered_ || !ok) {  // the answer is written, or the server shuts down
      delete this;
      return;
    }
    // The next call of this method may arrive while this one runs: another
    // polling thread takes it.
    Await(service_, cq_, call_, requester_, handler_);
    grpc::Status status = handler_(*call_, slot, hook, request_, &response_);
    answered_ = true;
    if (status.ok()) {
      writer_.Finish(response_, status, this);
    } else {
      writer_.FinishWithError(status, this);
    }
  }

 private:
  AsyncUnary(inference::GRPCInferenceService::AsyncService* service, grpc::ServerCompletionQueue* cq,
             const ModelCall* call, Requester requester, Handler handler)
      : service_(service), cq_(cq), call_(call), requester_(requester), handler_(handler),
        writer_(&ctx_) {}

  inference::GRPCInferenceService::AsyncService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  const ModelCall* const call_;
  const Requester requester_;
  const Handler handler_;
  grpc::ServerContext ctx_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_;
  bool answered_ = false;
};

grpc::Status InferHandler(const ModelCall& call, size_t slot, manypy::InterruptHook* hook,
                          const ModelInferRequest& request, ModelInferResponse* response) {
  return call.Infer(slot, hook, request, response);
}

grpc::Status ConfigHandler(const ModelCall&, size_t, manypy::InterruptHook*,
                           const inference::ModelConfigRequest&, inference::ModelConfigResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "manypy-bench-ideal-grpc-server has no ModelConfig");
}

grpc::Status MetadataHandler(const ModelCall& call, size_t, manypy::InterruptHook*,
                             const ModelMetadataRequest& request, ModelMetadataResponse* response) {
  return call.Metadata(request, response);
}

[[noreturn]] void Usage(const std::string& why) {
  fprintf(stderr, "manypy-bench-ideal-grpc-server: %s\nusage: manypy-bench-ideal-grpc-server "
          "--archive PATH [--interpreters N] [--api callback|async] [--threads N] [--port N]\n",
          why.c_str());
  exit(2);
}

std::unique_ptr<grpc::Server> Listen(grpc::ServerBuilder* builder, int port) {
  int bound = 0;
  builder->AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                            &bound);
  std::unique_ptr<grpc::Server> server = builder->BuildAndStart();
  if (server == nullptr || bound == 0) Usage("cannot listen on 127.0.0.1:" + std::to_string(port));
  printf("listening on 127.0.0.1:%d\n", bound);
  fflush(stdout);
  return server;
}

}  // namespace

int main(int argc, char** argv) {
  std::string archive;
  std::string api = "callback";
  size_t interpreters = 2;
  size_t threads = 0;
  int port = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    if (flag == "--archive") {
      archive = argv[++i];
    } else if (flag == "--interpreters") {
      interpreters = static_cast<size_t>(std::atoi(argv[++i]));
    } else if (flag == "--api") {
      api = argv[++i];
    } else if (flag == "--threads") {
      threads = static_cast<size_t>(std::atoi(argv[++i]));
    } else if (flag == "--port") {
      port = std::atoi(argv[++i]);
    } else {
      Usage("unknown flag " + flag);
    }
  }
  if (archive.empty() || interpreters == 0 || port < 0) {
    Usage("--archive is required, --interpreters N > 0, --port N >= 0");
  }
  if (api != "callback" && api != "async") Usage("--api is callback or async, got '" + api + "'");
  if (threads == 0) threads = interpreters;

  try {
    manypy::PoolOptions options;
    options.interpreters = interpreters;
    options.intra_op_threads = manypy::DefaultIntraOpThreads(interpreters);  // the server's default
    auto pool = manypy::InterpreterPool::Create(options);
    if (!pool.ok()) Usage("the pool failed to start: " + pool.status().ToString());
    auto model = manypy::PythonModel::Load(pool->get(), archive);
    if (!model.ok()) Usage(model.status().ToString());
    for (size_t slot = 0; slot < interpreters; ++slot) {  // as manypy-bench-overhead-pool warms
      manypy::Status warm = manypy::WarmUp(**model, (*model)->manifest(), slot, 50);
      if (!warm.ok()) Usage("warm-up: " + warm.ToString());
    }
    ModelCall call(model->get());

    grpc::ServerBuilder builder;
    if (api == "callback") {
      CallbackIdeal service(&call, interpreters);
      // As manypy-server and the bare server: the default health service on.
      grpc::EnableDefaultHealthCheckService(true);
      builder.RegisterService(&service);
      std::unique_ptr<grpc::Server> server = Listen(&builder, port);
      server->Wait();
      return 0;
    }
    inference::GRPCInferenceService::AsyncService service;
    builder.RegisterService(&service);
    std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
    std::unique_ptr<grpc::Server> server = Listen(&builder, port);
    using Infer = AsyncUnary<ModelInferRequest, ModelInferResponse>;
    using Metadata = AsyncUnary<ModelMetadataRequest, ModelMetadataResponse>;
    Infer::Await(&service, cq.get(), &call,
                 &inference::GRPCInferenceService::AsyncService::RequestModelInfer, InferHandler);
    Metadata::Await(&service, cq.get(), &call,
                    &inference::GRPCInferenceService::AsyncService::RequestModelMetadata,
                    MetadataHandler);
    // Without it manypy-perf's ModelConfig would wait for its deadline.
    AsyncUnary<inference::ModelConfigRequest, inference::ModelConfigResponse>::Await(
        &service, cq.get(), &call, &inference::GRPCInferenceService::AsyncService::RequestModelConfig,
        ConfigHandler);
    std::vector<std::thread> pollers;
    for (size_t t = 0; t < threads; ++t) {
      pollers.emplace_back([&cq, slot = t % interpreters] {
        pthread_setname_np(pthread_self(), "ideal_poller");  // bench-overhead's per-thread counters
        manypy::InterruptHook hook;
        void* tag = nullptr;
        bool ok = false;
        while (cq->Next(&tag, &ok)) static_cast<AsyncCall*>(tag)->Proceed(ok, slot, &hook);
      });
    }
    server->Wait();  // until killed: nothing shuts it down
    for (auto& t : pollers) t.join();
  } catch (const std::exception& e) {
    fprintf(stderr, "manypy-bench-ideal-grpc-server: %s\n", e.what());
    return 1;
  }
  return 0;
}

#include "clients/perf/async_grpc_load.h"

#include <grpcpp/grpcpp.h>

#include "clients/cpp/grpc_status.h"

namespace manypy::perf {

using Clock = std::chrono::steady_clock;

struct AsyncGrpcLoad::Stream {
  std::unique_ptr<client::InferenceClient> client;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
  // The call in flight (a ClientContext serves one call only).
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
  inference::ModelInferResponse response;
  grpc::Status status;
  Clock::time_point started;
};

AsyncGrpcLoad::AsyncGrpcLoad(
    std::function<StatusOr<std::unique_ptr<client::InferenceClient>>()> make_client,
    inference::ModelInferRequest request, std::chrono::milliseconds timeout,
    std::chrono::milliseconds connect_timeout)
    : make_client_(std::move(make_client)),
      request_(std::move(request)),
      timeout_(timeout),
      connect_timeout_(connect_timeout) {}

AsyncGrpcLoad::~AsyncGrpcLoad() = default;

Status AsyncGrpcLoad::Connect(int streams) {
  streams_.clear();
  for (int i = 0; i < streams; ++i) {
    auto made = make_client_();
    if (!made.ok()) return made.status();
    Status connected = (*made)->WaitForConnection(connect_timeout_);
    if (!connected.ok()) return connected;
    auto stream = std::make_unique<Stream>();
    stream->stub = inference::GRPCInferenceService::NewStub((*made)->channel());
    stream->client = std::move(*made);
    streams_.push_back(std::move(stream));
  }
  return Status::Ok();
}

namespace {

// The completion queue of one Run: drained before it is destroyed, as gRPC requires.
struct Queue {
  grpc::CompletionQueue cq;
  ~Queue() {
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }
};

}  // namespace

void AsyncGrpcLoad::Run(Recorder* recorder, const std::atomic<bool>& stop) {
  Queue queue;
  auto start = [&](Stream& s) {
    s.context = std::make_unique<grpc::ClientContext>();
    s.client->PrepareContext(s.context.get(), timeout_);
    s.response.Clear();
    s.started = Clock::now();
    s.reader = s.stub->AsyncModelInfer(s.context.get(), request_, &queue.cq);
    s.reader->Finish(&s.response, &s.status, &s);
  };
  for (auto& s : streams_) start(*s);
  size_t in_flight = streams_.size();
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && queue.cq.Next(&tag, &ok)) {
    Stream& s = *static_cast<Stream*>(tag);
    RequestRecord record{
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s.started).count(),
        "OK"};
    if (s.status.ok()) {
      recorder->Add(record);
    } else {
      Status failed = client::FromGrpcStatus(s.status);
      record.code = StatusCodeName(failed.code());
      recorder->AddFailure(record, failed.message());
    }
    if (stop.load(std::memory_order_relaxed)) {
      --in_flight;
    } else {
      start(s);
    }
  }
}

}  // namespace manypy::perf

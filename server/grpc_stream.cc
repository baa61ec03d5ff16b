#include "server/grpc_stream.h"

namespace manypy {

StreamInferReactor::StreamInferReactor(grpc::CallbackServerContext* ctx,
                                       const InferenceHandler* handler, Executor* executor)
    : ctx_(ctx), handler_(handler), executor_(executor) {
  StartRead(&incoming_);
}

void StreamInferReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client closed its side (or the call broke)
    std::lock_guard<std::mutex> lock(mu_);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++running_;
  }
  auto received = std::chrono::steady_clock::now();
  auto request = std::move(incoming_);
  incoming_.Clear();
  bool queued = executor_->Submit([this, request = std::move(request), received]() mutable {
    Run(std::move(request), received);
  });
  if (!queued) {
    inference::ModelStreamInferResponse response;
    response.set_error_message("the server is shutting down");
    Enqueue(std::move(response));
  }
  StartRead(&incoming_);
}

void StreamInferReactor::Run(inference::ModelInferRequest request,
                             std::chrono::steady_clock::time_point received) {
  inference::ModelStreamInferResponse response;
  Status status = CheckStillWanted(ctx_);
  if (status.ok()) status = handler_->Infer(request, received, response.mutable_infer_response());
  if (!status.ok()) {
    response.clear_infer_response();
    response.set_error_message(status.ToString());
    response.mutable_infer_response()->set_id(request.id());  // lets the client match the error
    response.mutable_infer_response()->set_model_name(request.model_name());
  }
  Enqueue(std::move(response));
}

void StreamInferReactor::Enqueue(inference::ModelStreamInferResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
  outbox_.push_back(std::move(response));
  if (!writing_) {
    writing_ = true;
    StartWrite(&outbox_.front());
  }
}

void StreamInferReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  outbox_.pop_front();
  writing_ = false;
  if (!ok) outbox_.clear();  // the stream broke: nobody can receive the rest
  if (!outbox_.empty()) {
    writing_ = true;
    StartWrite(&outbox_.front());
    return;
  }
  MaybeFinishLocked();
}

void StreamInferReactor::MaybeFinishLocked() {
  if (finished_ || !reads_done_ || running_ > 0 || writing_ || !outbox_.empty()) return;
  finished_ = true;
  Finish(grpc::Status::OK);
}

}  // namespace manypy

#include "server/grpc/grpc_stream.h"

#include <memory>

namespace manypy {

StreamInferReactor::StreamInferReactor(grpc::CallbackServerContext* ctx, InferenceServer* server)
    : ctx_(ctx), server_(server) {
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
  // Both live until the reply: the encoder reads the request's requested outputs.
  auto wire = std::make_shared<inference::ModelInferRequest>(std::move(incoming_));
  auto response = std::make_shared<inference::ModelStreamInferResponse>();
  incoming_.Clear();
  InferFromWire(server_, ctx_, wire.get(), response->mutable_infer_response(),
                [this, wire, response](const Status& status) {
                  if (!status.ok()) {
                    response->clear_infer_response();
                    response->set_error_message(status.ToString());
                    // Lets the client match the error to its request.
                    response->mutable_infer_response()->set_id(wire->id());
                    response->mutable_infer_response()->set_model_name(wire->model_name());
                  }
                  Enqueue(std::move(*response));
                });
  StartRead(&incoming_);
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

#include "server/grpc/grpc_stream.h"

#include <memory>

namespace manypy {
namespace {

// Triton's parameter names for a decoupled model's responses.
constexpr const char* kFinalResponse = "triton_final_response";
constexpr const char* kEnableEmptyFinal = "triton_enable_empty_final_response";

void MarkFinal(inference::ModelInferResponse* response, bool final) {
  (*response->mutable_parameters())[kFinalResponse].set_bool_param(final);
}

bool WantsEmptyFinal(const inference::ModelInferRequest& wire) {
  auto it = wire.parameters().find(kEnableEmptyFinal);
  return it != wire.parameters().end() && it->second.bool_param();
}

}  // namespace

StreamInferReactor::StreamInferReactor(grpc::CallbackServerContext* ctx, InferenceServer* server,
                                       BackgroundThread* writes)
    : ctx_(ctx), server_(server), writes_(writes) {
  StartRead(&incoming_);
}

void StreamInferReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client closed its side (or the call broke)
    MutexLock lock(mu_);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  auto stream = std::make_shared<WireStream>();
  {
    MutexLock lock(mu_);
    ++running_;
    windows_.insert(stream->window);
  }
  // Both live until the reply: the encoder reads the request's requested outputs.
  auto wire = std::make_shared<inference::ModelInferRequest>(std::move(incoming_));
  auto response = std::make_shared<inference::ModelStreamInferResponse>();
  incoming_.Clear();
  std::weak_ptr<StreamWindow> window = stream->window;
  stream->send = [this, window](inference::ModelInferResponse partial) {
    MarkFinal(&partial, false);
    Outgoing out;
    *out.response.mutable_infer_response() = std::move(partial);
    out.window = window.lock();
    Enqueue(std::move(out), false);
    return Status::Ok();
  };
  InferFromWire(
      server_, ctx_, wire.get(), response->mutable_infer_response(),
      [this, wire, response, stream](const Status& status) {
        Reply(status, *wire, response.get(), stream);
      },
      stream);
  StartRead(&incoming_);
}

void StreamInferReactor::Reply(const Status& status, const inference::ModelInferRequest& wire,
                               inference::ModelStreamInferResponse* response,
                               const std::shared_ptr<WireStream>& stream) {
  {
    MutexLock lock(mu_);
    windows_.erase(stream->window);
  }
  Outgoing out;
  if (!status.ok()) {
    out.response.set_error_message(status.ToString());
    // Lets the client match the error to its request.
    out.response.mutable_infer_response()->set_id(wire.id());
    out.response.mutable_infer_response()->set_model_name(wire.model_name());
    if (stream->streams) MarkFinal(out.response.mutable_infer_response(), true);
    return Enqueue(std::move(out), true);
  }
  if (!stream->streams) {
    out.response = std::move(*response);
    return Enqueue(std::move(out), true);
  }
  if (!WantsEmptyFinal(wire)) return Enqueue({}, true);  // nothing to write: the request just ends
  inference::ModelInferResponse* final = out.response.mutable_infer_response();
  final->set_id(wire.id());
  final->set_model_name(wire.model_name());
  final->set_model_version(wire.model_version());
  MarkFinal(final, true);
  Enqueue(std::move(out), true);
}

void StreamInferReactor::Enqueue(Outgoing out, bool final) {
  MutexLock lock(mu_);
  if (final) --running_;
  bool empty = !out.response.has_infer_response() && out.response.error_message().empty();
  if (broken_ || empty) {  // nobody can receive it, or there is nothing to send
    if (out.window) out.window->Release();
    MaybeFinishLocked();
    return;
  }
  outbox_.push_back(std::move(out));
  if (!writing_) {
    writing_ = true;
    // Not on this thread, which is most often the worker of a running batch
    // with the other streams' responses and the next step to compute: a
    // write costs it 20-25 us (framing, the socket's send, waking the
    // reader); one thread starting every idle stream's write took 10% less
    // server CPU per token at 16 streams and kept it off the model's core
    // (docs/benchmarks.md, text generation).
    writes_->Post([this] { StartQueuedWrite(); });
  }
}

void StreamInferReactor::StartQueuedWrite() {
  MutexLock lock(mu_);
  StartWrite(&outbox_.front().response);
}

void StreamInferReactor::OnWriteDone(bool ok) {
  MutexLock lock(mu_);
  if (outbox_.front().window) outbox_.front().window->Release();
  outbox_.pop_front();
  writing_ = false;
  if (!ok) {  // the stream broke: nobody can receive the rest
    broken_ = true;
    for (auto& out : outbox_) {
      if (out.window) out.window->Release();
    }
    outbox_.clear();
    for (const auto& w : windows_) w->Close();
  }
  if (!outbox_.empty()) {
    writing_ = true;
    StartWrite(&outbox_.front().response);
    return;
  }
  MaybeFinishLocked();
}

void StreamInferReactor::OnCancel() {
  MutexLock lock(mu_);
  for (const auto& w : windows_) w->Close();
}

void StreamInferReactor::MaybeFinishLocked() {
  if (finished_ || !reads_done_ || running_ > 0 || writing_ || !outbox_.empty()) return;
  finished_ = true;
  Finish(grpc::Status::OK);
}

}  // namespace manypy

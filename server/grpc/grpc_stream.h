// StreamInferReactor: one ModelStreamInfer call. Reads requests as they come,
// prepares each on the gRPC thread and hands it to its model's scheduler,
// and writes each request's responses as they come: one for an ordinary
// model; for a streaming (decoupled) model one per value it yields, each
// with the parameter triton_final_response=false, then, when the request
// asked for it with triton_enable_empty_final_response, an empty response
// with triton_final_response=true, as Triton's decoupled models answer.
// Errors go in error_message (the stream stays open). Writes are serialized;
// a streaming request holds at most StreamWindow's capacity unwritten. A
// write that starts while none is in flight is started on the frontend's
// write thread (`writes`), not on the thread that queued the response (a
// model's worker); the next ones start from OnWriteDone on gRPC's threads.
// The reactor deletes itself when gRPC is done with it.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>

#include "common/mutex.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/core/inference_server.h"
#include "server/lifecycle/background_thread.h"

namespace manypy {

/// Prepare -> Schedule for one wire request; `reply` is called once with the
/// final status after `response` has been filled (from any thread). With
/// `stream`, a streaming model's responses go to it instead.
void InferFromWire(InferenceServer* server, grpc::CallbackServerContext* ctx,
                   const inference::ModelInferRequest* wire, inference::ModelInferResponse* response,
                   std::function<void(const Status&)> reply,
                   std::shared_ptr<WireStream> stream = nullptr);

class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  /// `writes` (the frontend's) must outlive the call.
  StreamInferReactor(grpc::CallbackServerContext* ctx, InferenceServer* server,
                     BackgroundThread* writes);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  /// The client cancelled or the call broke: every stream stops waiting for room.
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  struct Outgoing {
    inference::ModelStreamInferResponse response;
    std::shared_ptr<StreamWindow> window;  ///< released once written; null for a final response
  };
  /// Queues one response; `final` ends its request (which may end the call).
  void Enqueue(Outgoing out, bool final);
  void MaybeFinishLocked() REQUIRES(mu_);
  /// On the write thread: writes outbox_'s front (queued by Enqueue).
  void StartQueuedWrite();
  /// The final answer to one request: its error, its one response (ordinary
  /// model), or (streaming model) the empty final response if asked for.
  void Reply(const Status& status, const inference::ModelInferRequest& wire,
             inference::ModelStreamInferResponse* response, const std::shared_ptr<WireStream>& stream);

  grpc::CallbackServerContext* const ctx_;
  InferenceServer* const server_;
  BackgroundThread* const writes_;
  inference::ModelInferRequest incoming_;  // owned by the read in flight

  Mutex mu_;
  std::deque<Outgoing> outbox_ GUARDED_BY(mu_);                      // front() is being written
  std::set<std::shared_ptr<StreamWindow>> windows_ GUARDED_BY(mu_);  // of requests not yet answered
  // A write is in flight or queued on writes_ (so the call cannot finish
  // before it ran: the reactor outlives the task that refers to it).
  bool writing_ GUARDED_BY(mu_) = false;
  bool reads_done_ GUARDED_BY(mu_) = false;
  bool broken_ GUARDED_BY(mu_) = false;  // a write failed or the call was cancelled
  int running_ GUARDED_BY(mu_) = 0;      // requests not yet answered
  bool finished_ GUARDED_BY(mu_) = false;
};

}  // namespace manypy

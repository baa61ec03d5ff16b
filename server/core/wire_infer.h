// InferWire: Prepare -> Schedule for one Open Inference Protocol request, the
// transport-neutral part every frontend (gRPC, HTTP) shares: model lookup,
// PrepareRequest, then Model::Infer or Model::Reject. Thread-safe.
#pragma once

#include <functional>
#include <memory>

#include "proto/grpc_service.pb.h"
#include "server/core/stream_window.h"
#include "server/inference/request_trace.h"
#include "server/lifecycle/model_manager.h"

namespace manypy {

/// How a frontend that can carry several responses per request (gRPC
/// ModelStreamInfer, HTTP generate) takes a streaming model's responses.
struct WireStream {
  /// Called from the worker for each response, in order, once `window` has
  /// room for it: the frontend queues it for the client and calls
  /// window->Release() when it has been written or dropped. OK to go on; any
  /// other status ends the stream with it (a frontend that takes only so many).
  std::function<Status(inference::ModelInferResponse response)> send;
  std::shared_ptr<StreamWindow> window = std::make_shared<StreamWindow>();
  /// Set by InferWire, before the request is queued, when the model streams:
  /// then its responses go to `send` and the final reply carries only the
  /// status (InferWire's `response` stays empty).
  bool streams = false;
};

/// What a frontend knows of the connection a call came on, for the policies
/// that depend on it (client shared memory: see client_shared_memory.h).
struct WireConnection {
  bool loopback = false;  ///< the peer is this host (127.0.0.0/8, ::1, a Unix socket)
  bool tls = false;       ///< the connection is TLS
};

class ClientSharedMemory;

/// How a frontend's client may end a request early, and how it takes a stream.
struct WireCallOptions {
  Clock::time_point deadline = Clock::time_point::max();  ///< the client's, if any
  std::function<bool()> cancelled;                        ///< optional
  /// Null for a call with one response (gRPC ModelInfer, HTTP infer): a
  /// streaming model refuses it, naming the calls that stream.
  std::shared_ptr<WireStream> stream;
  WireConnection connection;
  /// The client's trace context and the protocol's span attributes (read
  /// only when tracing is on: server/inference/request_trace.h).
  TraceParent trace;
  /// The caller's thread may run the model's call itself when an interpreter
  /// is idle and nothing waits (Model::InferHereIfIdle): a frontend thread of
  /// a call with one response (gRPC ModelInfer, HTTP infer). Not when the
  /// model lookup waited for an on-demand load (its answer comes on the
  /// loader's thread, which must not run models).
  bool run_here_if_idle = false;
};

/// Prepares `wire` for its model and hands it to the model's scheduler.
/// `reply` is called once with the final status, after `response` has been
/// filled (header and outputs, when OK), from any thread (a dispatcher worker,
/// or this thread when the request fails early). `wire` and `response` must
/// live until then. Inputs and outputs that name a shared-memory region are
/// resolved in `shm` when its policy allows the call's connection (else the
/// request is refused with its reason); `shm` must outlive the request.
void InferWire(ModelManager* models, const ClientSharedMemory* shm,
               const inference::ModelInferRequest* wire,
               inference::ModelInferResponse* response, WireCallOptions options,
               std::function<void(const Status&)> reply);

/// Answers a request for `model` (`version`) that failed before it could be
/// prepared (an HTTP body that does not decode) with `status` through Finish,
/// so it is counted once like any other refusal: against the model version
/// when one is loaded, else as a request that reached no model. `reply` is
/// called once, from this thread.
void RefuseWire(ModelManager* models, const std::string& model, const std::string& version,
                const Status& status, std::function<void(const Status&)> reply);

}  // namespace manypy

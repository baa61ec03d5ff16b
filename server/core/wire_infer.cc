#include "server/core/wire_infer.h"

#include <atomic>

#include "server/core/client_shared_memory.h"
#include "server/inference/cache_key.h"
#include "server/inference/empty_batch.h"
#include "server/inference/output_encoder.h"
#include "server/inference/prepare.h"
#include "server/inference/shared_memory_refs.h"

namespace manypy {
namespace {

void FillResponseHeader(const Manifest& m, const inference::ModelInferRequest& wire,
                        inference::ModelInferResponse* response) {
  response->set_model_name(m.name);
  response->set_model_version(std::to_string(m.version));
  response->set_id(wire.id());
  *response->mutable_parameters() = wire.parameters();
}

// Sends a streaming model's responses to `stream`: each waits for room in
// the stream's window, is encoded like a unary response, and is handed on.
Status StreamTo(const Manifest* m, const inference::ModelInferRequest* wire,
                const std::shared_ptr<WireStream>& stream, InferenceRequest* request) {
  if (stream == nullptr) {
    return InvalidArgument("model '" + m->name +
                           "' streams its responses: call it with gRPC ModelStreamInfer, or "
                           "HTTP POST /v2/models/" + m->name + "/generate_stream (or /generate "
                           "for a model that yields one response)");
  }
  if (!request->output_regions.empty()) {
    return InvalidArgument("model '" + m->name +
                           "' streams its responses: its outputs cannot go to shared memory "
                           "(each response would overwrite the one before it unread)");
  }
  stream->streams = true;
  request->stream = [m, wire, stream, deadline = request->client_deadline,
                     client_left = request->cancelled, span = request->span,
                     sent = int64_t{0}](std::vector<Value>& outputs,
                                        std::chrono::microseconds stall_limit) mutable {
    Status room = stream->window->Acquire(m->name, stall_limit, deadline, client_left);
    if (!room.ok()) return room;
    inference::ModelInferResponse response;
    FillResponseHeader(*m, *wire, &response);
    Status encoded = EncodeOutputs(outputs, *m, *wire, nullptr, &response);
    if (!encoded.ok()) {
      stream->window->Release();
      return encoded;
    }
    const int64_t bytes = span != nullptr && span->recording()
                              ? static_cast<int64_t>(response.ByteSizeLong()) : 0;
    Status sent_status = stream->send(std::move(response));
    // Each response an event on the request's span: its index and size.
    if (bytes > 0 && sent_status.ok()) {
      span->AddEvent("manypy.response", {{"manypy.response.index", sent},
                                         {"manypy.response.bytes", bytes}});
    }
    ++sent;
    return sent_status;
  };
  return Status::Ok();
}

// The response cache for a model that uses it: answers `request` from it
// (true), or arranges for its answer to be stored when it is encoded. Either
// way the request's times record the lookup (hit or miss) and its cost.
bool AnswerFromCache(const Model& model, const inference::ModelInferRequest& wire,
                     RequestPtr& request) {
  ResponseCache* cache = model.response_cache();
  if (cache == nullptr) return false;
  const Clock::time_point start = Clock::now();
  CacheKey key = ResponseCacheKey(model.cache_owner(), model.manifest(), *request, wire);
  std::optional<std::vector<Value>> hit = cache->Find(key);
  RequestTimes& times = request->times;
  times.cache_time = Clock::now() - start;
  if (hit.has_value()) {
    times.cache = RequestTimes::Cache::kHit;
    model.Answer(std::move(request), std::move(*hit));
    return true;
  }
  times.cache = RequestTimes::Cache::kMiss;
  // Stored as the answer is encoded (in Finish, before it is counted), so
  // the insert's time is the miss's too. A failed request stores nothing.
  request->encode = [cache, key, &times, encode = std::move(request->encode)](
                        std::vector<Value>& outputs) {
    Status status = encode(outputs);
    if (status.ok()) {
      const Clock::time_point insert = Clock::now();
      cache->Insert(key, outputs);
      times.cache_time += Clock::now() - insert;
    }
    return status;
  };
  return false;
}

// One request through its model lookup, which may wait for an on-demand
// load and so continue on another thread.
struct WireCall {
  ModelManager* models;
  const ClientSharedMemory* shm;
  const inference::ModelInferRequest* wire;
  inference::ModelInferResponse* response;
  WireCallOptions options;
  RequestPtr request;
  int attempt = 0;
  /// While models->Acquire runs on this thread: a lookup answered after it
  /// returned waited for an on-demand load (for the request's trace).
  std::atomic<bool> in_lookup{false};
  Clock::time_point lookup_started;
};

void Lookup(std::shared_ptr<WireCall> call);

void Route(const std::shared_ptr<WireCall>& call, StatusOr<std::shared_ptr<Model>> found) {
  const inference::ModelInferRequest* wire = call->wire;
  if (!found.ok() || call->attempt == 3) {
    // No model to count it against; the observer (metrics) still sees it.
    FinishUnrouted(wire->model_name(), std::move(call->request),
                   found.ok() ? Unavailable("model '" + wire->model_name() +
                                            "' kept being replaced; retry")
                              : found.status());
    return;
  }
  std::shared_ptr<Model> model = std::move(*found);
  InferenceRequest* request = call->request.get();
  if (request->span != nullptr && request->span->recording()) {
    if (!call->in_lookup) {
      request->span->AddChild("manypy.load_wait", call->lookup_started, Clock::now(),
                              {{"manypy.model.name", model->manifest().name},
                               {"manypy.model.version", model->manifest().version}},
                              "");
    }
    request->span->SetAttribute("manypy.request.bytes", static_cast<int64_t>(wire->ByteSizeLong()));
  }
  // Regions only for a call whose connection the policy allows.
  const SharedMemoryRegions* regions = nullptr;
  Status status;
  if (UsesSharedMemory(*wire)) {
    status = call->shm->Allowed(call->options.connection);
    if (status.ok()) regions = &call->shm->regions();
  }
  if (status.ok()) {
    status = PrepareRequest(*wire, model->manifest(), model->settings().default_timeout,
                            call->options.deadline, regions, request);
  }
  request->times.prepared = Clock::now();
  const Manifest* m = &model->manifest();  // the model outlives its requests
  if (status.ok() && m->streaming) status = StreamTo(m, wire, call->options.stream, request);
  if (!m->streaming) {
    request->encode = [m, wire, response = call->response, regions = &request->output_regions,
                       span = request->span.get()](std::vector<Value>& outputs) {
      FillResponseHeader(*m, *wire, response);
      Status encoded = EncodeOutputs(outputs, *m, *wire, regions, response);
      if (span != nullptr && span->recording() && encoded.ok()) {
        span->SetAttribute("manypy.response.bytes", static_cast<int64_t>(response->ByteSizeLong()));
      }
      return encoded;
    };
  }
  if (!status.ok()) {
    model->Reject(std::move(call->request), status);
    return;
  }
  // A 0-row batch whose outputs the signature fixes needs no model (nor a
  // place in its queue): answered now, as empty tensors.
  std::vector<Value> empty;
  if (request->batch_rows == 0 && EmptyBatchOutputs(*m, &empty)) {
    model->Answer(std::move(call->request), std::move(empty));
    return;
  }
  if (AnswerFromCache(*model, *wire, call->request)) return;
  // On the frontend's own thread (the lookup answered before Acquire
  // returned), an idle interpreter may run it here: no hand-off to a worker.
  call->request = call->options.run_here_if_idle && call->in_lookup
                      ? model->InferHereIfIdle(std::move(call->request))
                      : model->Infer(std::move(call->request));
  // A version swapped out (or evicted) between the lookup and the hand-over
  // gives the request back: look again (the new version is serving by then,
  // or loads again on demand).
  if (call->request != nullptr) {
    ++call->attempt;
    Lookup(call);
  }
}

void Lookup(std::shared_ptr<WireCall> call) {
  ModelManager* models = call->models;
  const inference::ModelInferRequest* wire = call->wire;
  call->in_lookup = true;
  call->lookup_started = Clock::now();
  models->Acquire(wire->model_name(), wire->model_version(), call->options.deadline,
                  call->request->cancelled,
                  [call](StatusOr<std::shared_ptr<Model>> found) { Route(call, std::move(found)); });
  call->in_lookup = false;
}

}  // namespace

void InferWire(ModelManager* models, const ClientSharedMemory* shm,
               const inference::ModelInferRequest* wire,
               inference::ModelInferResponse* response, WireCallOptions options,
               std::function<void(const Status&)> reply) {
  auto call = std::make_shared<WireCall>();
  call->models = models;
  call->shm = shm;
  call->wire = wire;
  call->response = response;
  call->request = std::make_unique<InferenceRequest>();
  call->request->times.received = Clock::now();
  call->request->reply = std::move(reply);
  call->request->cancelled = std::move(options.cancelled);
  if (RequestTracer* tracer = GetRequestTracer()) {
    call->request->span = tracer->Start(options.trace, wire->model_name(), call->request->times.received);
    if (call->request->span != nullptr) {
      call->request->span->SetAttribute("manypy.request.id", wire->id());
    }
  }
  call->options = std::move(options);
  Lookup(std::move(call));
}

void RefuseWire(ModelManager* models, const std::string& model, const std::string& version,
                const Status& status, std::function<void(const Status&)> reply) {
  auto request = std::make_unique<InferenceRequest>();
  request->times.received = request->times.prepared = Clock::now();
  request->reply = std::move(reply);
  auto found = models->Get(model, version);
  if (found.ok()) {
    (*found)->Reject(std::move(request), status);
  } else {
    FinishUnrouted(model, std::move(request), status);
  }
}

}  // namespace manypy

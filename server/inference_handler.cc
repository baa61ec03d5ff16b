#include "server/inference_handler.h"

#include "interpreters/python_error.h"
#include "server/log.h"
#include "server/tensor_codec.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Nanos(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

}  // namespace

Status InferenceHandler::Infer(const inference::ModelInferRequest& request,
                               Clock::time_point enqueued,
                               inference::ModelInferResponse* response) const {
  auto model = models_->Get(request.model_name(), request.model_version());
  if (!model.ok()) return model.status();
  const Manifest& manifest = (*model)->manifest();
  InferenceStats& stats = (*model)->stats();

  Clock::time_point start = Clock::now();
  std::vector<Value> inputs, outputs;
  Status status = DecodeInputs(request, manifest, &inputs);
  Clock::time_point decoded = Clock::now(), ran = decoded;
  if (status.ok()) {
    try {
      outputs = (*model)->model().Infer(inputs);
    } catch (const PythonError& e) {
      status = Internal("model '" + manifest.name + "' raised " + e.what());
    } catch (const std::exception& e) {
      status = Internal("model '" + manifest.name + "' failed: " + e.what());
    }
    ran = Clock::now();
  }
  if (status.ok()) {
    response->set_model_name(manifest.name);
    response->set_model_version(std::to_string(manifest.version));
    response->set_id(request.id());
    *response->mutable_parameters() = request.parameters();
    status = EncodeOutputs(outputs, manifest, request, response);
  }
  Clock::time_point done = Clock::now();

  stats.queue_ns += Nanos(enqueued, start);
  if (!status.ok()) {
    // The model's own failures concern the operator; bad requests only the client.
    Log(status.code() == StatusCode::kInternal ? LogLevel::kWarning : LogLevel::kVerbose,
        "request '" + request.id() + "' to " + manifest.name + " failed: " + status.ToString());
    stats.fail_count++;
    stats.fail_ns += Nanos(enqueued, done);
    return status;
  }
  int64_t batch = manifest.max_batch_size > 0 && request.inputs_size() > 0 &&
                          request.inputs(0).shape_size() > 0
                      ? request.inputs(0).shape(0)
                      : 1;
  stats.inference_count += batch;
  stats.execution_count++;
  stats.success_count++;
  stats.success_ns += Nanos(enqueued, done);
  stats.compute_input_ns += Nanos(start, decoded);
  stats.compute_infer_ns += Nanos(decoded, ran);
  stats.compute_output_ns += Nanos(ran, done);
  stats.last_inference_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch()).count());
  return Status::Ok();
}

}  // namespace manypy

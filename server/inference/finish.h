// The Finish stage: the one place every request ends, whatever its outcome
// (answered, refused, expired, cancelled, abandoned at shutdown): encoded,
// counted once by outcome (statistics, observer, access log), answered.
// Thread-safe; called from request and worker threads.
#pragma once

#include <string>
#include <vector>

#include "server/inference/dispatched_model.h"

namespace manypy {

/// The Finish stage, the one place where requests end: encodes the outputs
/// (when `status` is OK) through the request's frontend, counts the request
/// once (statistics, observer, access log) by its outcome, then replies.
/// Every request ends here exactly once, whatever its outcome: answered,
/// refused, expired, cancelled or abandoned at shutdown.
void FinishRequest(const DispatchedModel& model, RequestPtr request, Status status,
                   std::vector<Value> outputs, int64_t batch_rows);

/// Answers a request that reached no loaded model (unknown model or version,
/// model not ready) with `status`, reporting it to the observer as a request
/// for `name`.
void FinishUnrouted(const std::string& name, RequestPtr request, const Status& status);

/// Answers `request` with the error `status` while a worker may still run it
/// (the server gives up at shutdown): as FinishRequest, but the request stays
/// with its execution, and only the frontend's side (reply) and its finish
/// time are touched.
void FinishAbandoned(const DispatchedModel& model, InferenceRequest& request, const Status& status);

/// Records one execution of `rows` batch rows on interpreter `slot`, run from
/// `started` to `ended`; `error_type` names the model's exception, if any.
void RecordExecution(const DispatchedModel& model, size_t slot, int64_t rows, Clock::time_point started,
                     Clock::time_point ended, const std::string& error_type);

}  // namespace manypy

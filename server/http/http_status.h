// The one place a manypy Status becomes an HTTP status code. Pure; thread-safe.
#pragma once

#include "common/status.h"

namespace manypy {

/// kInvalidArgument 400, kNotFound 404, kAlreadyExists 409, kFailedPrecondition
/// 400 (as Triton answers a load in the wrong control mode: the request is
/// wrong for this server, not in conflict with a resource's state),
/// kResourceExhausted 429 (a full queue, a message over the limit once read;
/// bodies over --max-message-size are refused 413 before they are read),
/// kUnavailable 503, kDeadlineExceeded 504, kInternal 500, kCancelled 499
/// (nginx's "client closed request": the client left, so the answer only
/// reaches the access log).
int ToHttpStatus(const Status& status);

}  // namespace manypy

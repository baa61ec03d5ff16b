// Open-file descriptors of the serving process: RLIMIT_NOFILE's soft limit
// raised to the hard one at start, and connection limits that fit below it.
// Plain functions and values; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace manypy {

/// RLIMIT_NOFILE before and after RaiseOpenFileLimit.
struct OpenFileLimit {
  int64_t soft_before = 0;
  int64_t soft = 0;   ///< the limit now in force
  int64_t hard = 0;   ///< -1: unlimited
  std::string error;  ///< why it could not be raised; empty when it was (or was at the hard limit)
};

/// Raises the soft limit to the hard one (to fs.nr_open where the hard limit is
/// unlimited): descriptors are what every connection costs, and a soft limit of
/// 1024 (a common default) runs out before the connection limits apply.
OpenFileLimit RaiseOpenFileLimit();

/// Descriptors open in this process now (/proc/self/fd); -1 when unreadable
/// (as when none is left to read it with).
int64_t OpenDescriptors();

/// RLIMIT_NOFILE's soft limit now; -1 when unlimited or unknown.
int64_t OpenFileSoftLimit();

/// Descriptors kept for the server's own files beyond those open at start:
/// models loaded later, the metrics endpoint's connection, logs, Python's own.
constexpr int64_t kReservedDescriptors = 64;

/// The connection limits after fitting them to the descriptors.
struct ConnectionLimits {
  int http = 0;
  int grpc = 0;
  int64_t available = 0;  ///< descriptors left for connections
  bool clamped = false;   ///< either limit was lowered
};

/// Fits `http` + `grpc` (the flags' limits; `http` 0 when HTTP is off) into
/// the descriptors `soft_limit` leaves once `in_use` are open and
/// kReservedDescriptors are kept: each is scaled down in proportion, never
/// below 1. Pure.
ConnectionLimits FitConnectionLimits(int64_t soft_limit, int64_t in_use, int http, int grpc);

/// The start-up line naming the limit and both connection limits.
std::string DescribeDescriptors(const OpenFileLimit& limit, int64_t in_use,
                                const ConnectionLimits& fitted, int http_flag, int grpc_flag);

}  // namespace manypy

// ReadFlags: manypy-server's command-line grammar, shared by the serving
// process (server_options.h) and the launcher (supervisor/launch_options.h),
// which reads only the flags it needs. Plain functions; thread-compatible.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace manypy {

/// The listening defaults both readers share.
constexpr const char* kDefaultAddress = "0.0.0.0";
constexpr int kDefaultHttpPort = 8000;
constexpr int kDefaultGrpcPort = 8001;
constexpr int kDefaultMetricsPort = 8002;

/// Receives each flag without its dashes and its value ("grpc-port", "8001").
using FlagSink = std::function<Status(const std::string& flag, const std::string& value)>;

/// Walks argv[1..]: `--flag=value`, `--flag value`, and the flags that take no
/// value (`--help`/`-h`, `--version`, `--no-http`, `--no-metrics`, `--tracing`,
/// `--no-supervisor`, `--clear-quarantine`, `--allow-client-shm[-remote]`), which
/// reach `sink` with the value "true" (`-h` as "help"). `--config=FILE` is read
/// here: each `flag=value` line of FILE reaches `sink` in its place (`#`
/// comments). Stops at the first error `sink` returns; INVALID_ARGUMENT for a
/// bare word or a flag missing its value, NOT_FOUND for an unreadable FILE.
Status ReadFlags(int argc, char** argv, const FlagSink& sink);

/// `value` as an integer in [min, max]; INVALID_ARGUMENT naming --`flag` otherwise.
Status ParseIntFlag(const std::string& flag, const std::string& value, long min, long max,
                    long* out);
/// "true" or "false"; INVALID_ARGUMENT naming --`flag` otherwise.
Status ParseBoolFlag(const std::string& flag, const std::string& value, bool* out);

}  // namespace manypy

#include "server/server_options.h"

#include "server/flag_reader.h"
#include "server/lifecycle/memory_budget.h"

#include <filesystem>

namespace manypy {
namespace {

std::string DefaultRepository() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "model-repository" : (exe.parent_path().parent_path() / "model-repository").string();
}

Status ParseInt(const std::string& flag, const std::string& value, long min, long max, long* out) {
  return ParseIntFlag(flag, value, min, max, out);
}

// --tracing and --trace-*: refused, with the reason, by a server built
// without OpenTelemetry; else checked here, the OTEL_* variables at start.
Status ApplyTracing(const std::string& flag, const std::string& value, TracingOptions* t) {
  if (!TracingBuiltIn()) {
    return FailedPrecondition("--" + flag + ": tracing is not built into this manypy-server: " +
                              TracingUnavailableReason());
  }
  if (flag == "tracing") {
    if (value != "true" && value != "false") {
      return InvalidArgument("--tracing is true or false, got '" + value + "'");
    }
    t->enabled = value == "true";
  } else if (flag == "trace-endpoint") {
    t->endpoint = value;
  } else if (flag == "trace-sample-ratio") {
    try {
      size_t used = 0;
      double r = std::stod(value, &used);
      if (used != value.size() || !(r >= 0 && r <= 1)) throw std::out_of_range(value);
      t->sample_ratio = r;
    } catch (const std::exception&) {
      return InvalidArgument("--trace-sample-ratio needs a ratio in [0, 1], got '" + value + "'");
    }
  } else if (flag == "trace-service-name") {
    if (value.empty()) return InvalidArgument("--trace-service-name needs a name");
    t->service_name = value;
  } else {  // trace-resource
    if (value.find('=') == std::string::npos || value[0] == '=') {
      return InvalidArgument("--trace-resource needs KEY=VALUE, got '" + value + "'");
    }
    t->resource.push_back(value);
  }
  return Status::Ok();
}

Status Apply(const std::string& flag, const std::string& value, ServerOptions* o) {
  long n = 0;
  if (flag == "tracing" || flag == "trace-endpoint" || flag == "trace-sample-ratio" ||
      flag == "trace-service-name" || flag == "trace-resource") {
    return ApplyTracing(flag, value, &o->tracing);
  }
  if (flag == "model-repository") o->model_repository = value;
  else if (flag == "grpc-address") o->grpc_address = value;
  else if (flag == "grpc-port") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 65535, &n));
    o->grpc_port = static_cast<int>(n);
  } else if (flag == "http-port") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 65535, &n));
    o->http_port = static_cast<int>(n);
  } else if (flag == "http-address") o->http_address = value;
  else if (flag == "http" || flag == "no-http") {
    if (value != "true" && value != "false") {
      return InvalidArgument("--" + flag + " is true or false, got '" + value + "'");
    }
    o->http = (value == "true") == (flag == "http");
  } else if (flag == "interpreters") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 256, &n));
    o->interpreters = static_cast<size_t>(n);
  } else if (flag == "model-control-mode") {
    if (value != "none" && value != "explicit" && value != "on-demand") {
      return InvalidArgument("--model-control-mode is 'none', 'explicit' or 'on-demand', got '" +
                             value + "'");
    }
    o->explicit_model_control = value == "explicit";
    o->on_demand = value == "on-demand";
  } else if (flag == "load-model") o->load_models.push_back(value);
  else if (flag == "model-memory-budget") {
    auto bytes = ParseBytes(value);
    if (!bytes.ok()) return InvalidArgument("--model-memory-budget: " + bytes.status().message());
    o->model_memory_budget_bytes = *bytes;
  } else if (flag == "response-cache-bytes") {
    auto bytes = ParseBytes(value);
    if (!bytes.ok()) return InvalidArgument("--response-cache-bytes: " + bytes.status().message());
    o->response_cache_bytes = *bytes;
  } else if (flag == "allow-client-shm" || flag == "allow-client-shm-remote") {
    if (value != "true" && value != "false") {
      return InvalidArgument("--" + flag + " is true or false, got '" + value + "'");
    }
    (flag == "allow-client-shm" ? o->allow_client_shm : o->allow_client_shm_remote) = value == "true";
  } else if (flag == "max-loaded-models") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 1000000, &n));
    o->max_loaded_models = static_cast<size_t>(n);
  }
  else if (flag == "max-message-size") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1024, 2147483647L, &n));
    o->max_message_bytes = static_cast<int>(n);
  } else if (flag == "grace-period") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 3600, &n));
    o->grace_period_seconds = static_cast<int>(n);
  } else if (flag == "log-level") {
    if (value != "error" && value != "warning" && value != "info" && value != "verbose") {
      return InvalidArgument("--log-level is error, warning, info or verbose, got '" + value + "'");
    }
    o->log_level = value;
  } else if (flag == "max-queue-size") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1, 1000000, &n));
    o->serving.max_queue_size = static_cast<size_t>(n);
  } else if (flag == "run-to-completion-below-us") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 1000000, &n));
    o->run_to_completion_below_us = n;
  } else if (flag == "run-to-completion-quiet-us") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 1000000, &n));
    o->run_to_completion_quiet_us = n;
  } else if (flag == "max-execution-seconds") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 86400 * 365, &n));
    o->serving.max_execution_seconds = n;
  } else if (flag == "warmup-runs") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 1000, &n));
    o->serving.warmup_runs = n;
  } else if (flag == "model-config") {
    size_t colon = value.find(':'), eq = value.find('=', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || colon == 0 || eq == std::string::npos) {
      return InvalidArgument("--model-config takes NAME:SETTING=VALUE, got '" + value + "'");
    }
    std::string key = value.substr(colon + 1, eq - colon - 1), setting = value.substr(eq + 1);
    Status ok = CheckModelSetting(key, setting);
    if (!ok.ok()) return InvalidArgument("--model-config " + value + ": " + ok.message());
    o->serving.overrides[value.substr(0, colon)][key] = setting;
  } else if (flag == "metrics-port") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 65535, &n));
    o->metrics_port = static_cast<int>(n);
  } else if (flag == "metrics-address") o->metrics_address = value;
  else if (flag == "metrics" || flag == "no-metrics") {
    if (value != "true" && value != "false") {
      return InvalidArgument("--" + flag + " is true or false, got '" + value + "'");
    }
    o->metrics = (value == "true") == (flag == "metrics");
  } else if (flag == "log-format") {
    if (value != "text" && value != "json") {
      return InvalidArgument("--log-format is text or json, got '" + value + "'");
    }
    o->log_format = value;
  } else if (flag == "access-log") {
    try {
      size_t used = 0;
      double f = std::stod(value, &used);
      if (used != value.size() || !(f >= 0 && f <= 1)) throw std::out_of_range(value);
      o->access_log_fraction = f;
    } catch (const std::exception&) {
      return InvalidArgument("--access-log needs a fraction in [0, 1], got '" + value + "'");
    }
  } else if (flag == "cache-dir") o->cache_dir = value;
  else if (flag == "compile-cache-dir") o->compile_cache_dir = value;
  else if (flag == "auth-token-file") o->auth_token_file = value;
  else if (flag == "management-token-file") o->management_token_file = value;
  else if (flag == "tls-cert") o->tls_cert_file = value;
  else if (flag == "tls-key") o->tls_key_file = value;
  else if (flag == "tls-client-ca") o->tls_client_ca_file = value;
  else if (flag == "max-archive-size") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1024, int64_t{1} << 50, &n));
    o->max_archive_bytes = n;
  } else if (flag == "http-max-connections") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1, 1000000, &n));
    o->http_max_connections = static_cast<int>(n);
  } else if (flag == "http-read-timeout") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1, 3600, &n));
    o->http_read_timeout_seconds = static_cast<int>(n);
  } else if (flag == "grpc-max-connections") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1, 1000000, &n));
    o->grpc_max_connections = static_cast<int>(n);
  } else if (flag == "grpc-max-connection-age") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 0, 86400, &n));
    o->grpc_max_connection_age_seconds = static_cast<int>(n);
  } else if (flag == "grpc-max-concurrent-streams") {
    MANYPY_RETURN_IF_ERROR(ParseInt(flag, value, 1, 1000000, &n));
    o->grpc_max_concurrent_streams = static_cast<int>(n);
  }
  else if (flag == "crash-state-dir") {
    if (value.empty()) return InvalidArgument("--crash-state-dir needs a folder");
    o->crash_state_dir = value;
  } else if (flag == "supervisor" || flag == "no-supervisor" || flag == "clear-quarantine") {
    if (value != "true" && value != "false") {
      return InvalidArgument("--" + flag + " is true or false, got '" + value + "'");
    }
    if (flag == "clear-quarantine") {
      o->clear_quarantine = value == "true";
    } else {
      o->supervisor = (value == "true") == (flag == "supervisor");
    }
  }
  else return InvalidArgument("unknown flag --" + flag + " (see --help)");
  return Status::Ok();
}

}  // namespace

// The tracing flags, listed on every build (docs/operations.md lists them
// once); a build without OpenTelemetry says so and why.
static std::string TracingUsage() {
  std::string built = TracingBuiltIn()
                          ? "OTLP/HTTP; docs/operations.md \"Tracing\""
                          : "NOT BUILT IN: " + TracingUnavailableReason() +
                                "; these flags are refused";
  return "Tracing (OpenTelemetry, off by default; " + built + R"():
  --tracing[=BOOL]           export a span for every request (and its queue
                             wait, execution, nested calls, streamed responses)
                             to an OpenTelemetry collector; the client's W3C
                             traceparent/tracestate is joined
  --trace-endpoint=URL       OTLP/HTTP traces URL (default:
                             $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
                             $OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces, else
                             http://localhost:4318/v1/traces)
  --trace-sample-ratio=R     fraction of traces started here that are sampled
                             (default $OTEL_TRACES_SAMPLER_ARG, else 1); a
                             client's sampled flag is followed
  --trace-service-name=NAME  service.name (default $OTEL_SERVICE_NAME, else
                             manypy-server)
  --trace-resource=KEY=VALUE a resource attribute (repeatable), over
                             $OTEL_RESOURCE_ATTRIBUTES
)";
}

std::string ServerUsage() {
  return R"(usage: manypy-server [flags]

Serves the models of a repository of manypy archives (*.mpk) over the Open
Inference Protocol (KServe v2 / Triton gRPC) and grpc.health.v1.

  --model-repository=DIR     directory of model archives (default: the example
                             repository, ../model-repository beside this binary)
  --grpc-address=ADDR        address to listen on (default 0.0.0.0)
  --grpc-port=PORT           gRPC port (default 8001; 0 picks a free port)
  --http-port=PORT           KServe v2 REST (HTTP/JSON, Triton's binary-data
                             extension) port (default 8000; 0 picks a free port)
  --http-address=ADDR        address of the HTTP endpoint (default 0.0.0.0)
  --no-http                  no HTTP endpoint
  --interpreters=N           Python interpreters in the pool (default: one per CPU
                             the cgroup CPU quota, i.e. a container's CPU limit,
                             allows; else one per core)
  --model-control-mode=MODE  none: load every model at start (default);
                             explicit: load only --load-model models, then on
                             RepositoryModelLoad / RepositoryModelUnload requests;
                             on-demand: load only --load-model models (pinned),
                             any other on its first inference request (and on
                             RepositoryModelLoad), evicting idle ones under
                             --model-memory-budget / --max-loaded-models
  --load-model=NAME          a model to load at start (repeatable; explicit and
                             on-demand modes)
  --model-memory-budget=SIZE memory loaded models may hold, as measured at load
                             (e.g. 2G, 512MiB; default: none). On-demand mode
                             evicts idle models, least recently used first, to
                             fit; other modes refuse a load that does not fit
                             (RESOURCE_EXHAUSTED). docs/operations.md sizes it
  --max-loaded-models=N      models loaded at once (default 0: no cap); as the
                             budget
  --response-cache-bytes=SIZE
                             the response cache (e.g. 256MiB; default 0: none):
                             a model with response_cache (its manifest, or
                             --model-config=NAME:response_cache=true) answers a
                             request equal to an earlier one from it; least
                             recently used entries go first (docs/operations.md)
  --allow-client-shm[=BOOL]  clients may register system shared-memory regions
                             and pass tensors through them (Triton's extension;
                             default false), over plain connections from this
                             host only
  --allow-client-shm-remote[=BOOL]
                             ... and over TLS or from other hosts too (default
                             false; docs/operations.md says why not)
  --max-message-size=BYTES   largest gRPC message sent or received and largest
                             HTTP request body (default 64 MiB); larger requests
                             fail with RESOURCE_EXHAUSTED / HTTP 413
  --grace-period=SECONDS     on SIGTERM/SIGINT, how long queued and running
                             requests may finish (default 30); then the process
                             exits anyway (status 1 if it abandoned stuck calls)
  --max-queue-size=N         requests a model may have queued (default 256; the
                             manifest's max_queue_size wins); more are refused
                             with RESOURCE_EXHAUSTED
  --max-execution-seconds=S  a model call running longer is interrupted and
                             answered DEADLINE_EXCEEDED (default 60; 0: no limit;
                             the manifest's max_execution_seconds wins)
  --run-to-completion-below-us=US
                             a gRPC ModelInfer or HTTP infer call whose model's
                             recent calls took less than US microseconds runs on
                             the thread that received it when an interpreter is
                             idle, instead of waking a worker (default 0: off;
                             at most 1000000): less latency and CPU at low
                             concurrency, less throughput for a tiny model at
                             high concurrency (docs/benchmarks.md)
  --run-to-completion-quiet-us=US
                             ... and only when nothing else is queued or running
                             and no call ended within US microseconds (default
                             50; 0: no such rule): requests that arrive together
                             go to the workers instead of running one after
                             another on the thread that read them
  --warmup-runs=N            calls with inputs made from the signature that each
                             interpreter runs on a model before it is READY
                             (default 1; 0: none)
  --model-config=NAME:SETTING=VALUE
                             overrides one setting of model NAME (repeatable):
                             instance_count, max_queue_size,
                             max_execution_seconds, default_timeout_microseconds,
                             warmup_runs, dynamic_batching (true/false),
                             max_queue_delay_microseconds, response_cache
                             (true/false), sequence_batching (true/false),
                             max_sequence_idle_microseconds,
                             max_concurrent_sequences
  --log-level=LEVEL          error, warning, info (default) or verbose
  --log-format=FORMAT        text (default) or json: one JSON object per line
                             ({"ts", "level", "msg"}) on stderr
  --access-log=FRACTION      log this fraction of inference requests, sampled
                             (1: every one; default 0: none): model, version,
                             id, outcome, total/queue/compute milliseconds
  --metrics-port=PORT        Prometheus metrics on http://ADDR:PORT/metrics
                             (default 8002; 0 picks a free port, logged)
  --metrics-address=ADDR     address of the metrics endpoint (default 0.0.0.0);
                             it needs no token: bind it to 127.0.0.1 or an
                             internal address to keep it private
  --no-metrics               no metrics endpoint
  --cache-dir=DIR            where prepared interpreter libraries are cached
  --compile-cache-dir=DIR    Inductor's cache for torch.compile'd models, shared by the
                             interpreters and kept across restarts (default:
                             $TORCHINDUCTOR_CACHE_DIR, else CACHE_DIR/inductor)

Security (SECURITY.md):
  --auth-token-file=FILE     every call but the health probes (gRPC ServerLive,
                             ServerReady, grpc.health.v1; HTTP /v2/health/*)
                             needs 'authorization: Bearer <token>' with the token
                             in FILE (one token; surrounding whitespace trimmed).
                             Missing or wrong: UNAUTHENTICATED / HTTP 401
  --management-token-file=FILE
                             the repository API (RepositoryIndex, Load, Unload;
                             /v2/repository/...) needs this token instead; the
                             inference token gets PERMISSION_DENIED / HTTP 403.
                             It is accepted on every other call too
  --tls-cert=FILE            serve gRPC and HTTP over TLS only (1.2 or newer)
                             with this PEM certificate chain; needs --tls-key
  --tls-key=FILE             the certificate's PEM private key (unencrypted)
  --tls-client-ca=FILE       also require client certificates signed by a CA in
                             this PEM file (mutual TLS). The metrics endpoint
                             stays plain HTTP: see --metrics-address
  --max-archive-size=BYTES   archives larger on disk are refused at load
                             (default 32 GiB)
  --http-max-connections=N   open HTTP connections (default 1024); a connection
                             over the limit is closed at once without a reply
  --http-read-timeout=SECONDS
                             an HTTP connection has this long to send each
                             request, header and body, from the end of the last
                             reply (an idle keep-alive connection too), to take
                             each reply, and a TLS client to shake hands; then
                             it is closed without a reply (default 30)
  --grpc-max-connections=N   open gRPC connections (default 1024); a connection
                             over the limit is closed at once, its calls failing
                             UNAVAILABLE (a warning, at most once every 10 s)
  --grpc-max-concurrent-streams=N
                             concurrent calls per gRPC connection (HTTP/2
                             streams; default 1024); more wait in the client
                             until one ends. Request sizes: --max-message-size
  --grpc-max-connection-age=SECONDS
                             a gRPC connection older than this (+-10%) is asked
                             to go away (a graceful GOAWAY: calls in flight end,
                             the client reconnects without a failed call), so
                             that after SIGHUP clients move to the new serving
                             process (default 30; 0: never)

Crashes (docs/operations.md, "Crashes"):
  --no-supervisor            no parent process: a crash ends the server (for
                             those who leave restarts to systemd or Kubernetes).
                             By default a small parent holds the listening
                             sockets and restarts the serving process at once
                             when it dies of a signal
  --crash-state-dir=DIR      where crashes are recorded and models that crashed
                             the server twice within 10 minutes are quarantined
                             (default /tmp/manypy-crash-state; kept across restarts)
  --clear-quarantine         forget every recorded crash and quarantine at start

  --config=FILE              read flags from FILE, one flag=value per line
  --help                     this text
  --version                  the version of manypy, libtorch and Python

)" + TracingUsage();
}

StatusOr<ServerOptions> ParseServerOptions(int argc, char** argv, bool* help, bool* version) {
  ServerOptions o;
  o.model_repository = DefaultRepository();
  *help = false;
  if (version != nullptr) *version = false;
  MANYPY_RETURN_IF_ERROR(ReadFlags(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "help") {
      *help = true;
      return Status::Ok();
    }
    if (flag == "version" && version != nullptr) {
      *version = true;
      return Status::Ok();
    }
    return Apply(flag, value, &o);
  }));
  return o;
}

}  // namespace manypy

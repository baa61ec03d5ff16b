#include "server/server.h"

#include <ATen/Parallel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "interpreters/pool.h"
#include "interpreters/thread_policy.h"
#include "server/allocator_info.h"
#include "server/auth/access_tokens.h"
#include "server/blas_info.h"
#include "server/core/inference_server.h"
#include "server/core/python_services.h"
#include "server/cpu_quota.h"
#include "server/crash/python_stack_dumps.h"
#include "server/grpc/grpc_connection_limit.h"
#include "server/grpc/grpc_frontend.h"
#include "server/grpc/grpc_malformed_requests.h"
#include "server/grpc/grpc_tls.h"
#include "server/grpc/listening_sockets.h"
#include "server/http/http_frontend.h"
#include "server/inference/dispatcher.h"
#include "server/lifecycle/idle_memory_returner.h"
#include "server/lifecycle/model_manager.h"
#include "server/lifecycle/python_model.h"
#include "server/lifecycle/quarantine.h"
#include "server/library_logging.h"
#include "server/log.h"
#include "server/metrics/compile_metrics.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/python_metrics.h"
#include "server/open_files.h"
#include "server/startup_stop.h"
#include "server/supervisor/restart_metrics.h"
#include "server/tracing/tracing.h"

namespace manypy {
namespace {

constexpr const char* kServiceName = "inference.GRPCInferenceService";
// Boost.Asio threads of the HTTP frontend: its sessions parse and write; the
// models run on the dispatcher's workers (or, with --run-to-completion-below-us,
// a short call on an I/O thread when an interpreter is idle).
constexpr int kHttpIoThreads = 2;

// A part that could not start: its code is never INVALID_ARGUMENT, which
// Start keeps for an option's file that is wrong.
Status CannotStart(const std::string& what) { return Unavailable(what); }

void LogMathLibraries(size_t interpreters) {
  int intra = at::get_num_threads();
  LimitBlasThreads(intra);
  BlasInfo blas = DetectBlas();
  std::string blas_threads = blas.follows_openmp ? "threads follow libtorch's (OpenMP)"
                             : blas.threads > 0  ? std::to_string(blas.threads) + " thread(s)"
                                                 : "threads unknown";
  Log(LogLevel::kInfo, "math: BLAS " + blas.name + (blas.path.empty() ? "" : " (" + blas.path + ")") +
                           ", " + blas_threads + "; libtorch " + std::to_string(intra) +
                           " intra-op thread(s) per interpreter x " + std::to_string(interpreters) +
                           " interpreter(s)");
  Log(LogLevel::kInfo, "memory: " + MallocName());
  if (blas.reference) {
    Log(LogLevel::kWarning,
        "libtorch calls the reference (netlib) BLAS: linear layers, attention and LSTMs run up to "
        "19x slower than with OpenBLAS; install libopenblas0-openmp (tools/debian-packages.txt)");
  }
}

void LogCredentials(const ServerOptions& options, const AccessTokens& tokens,
                    const TlsCredentials* tls) {
  if (!options.auth_token_file.empty()) {
    Log(LogLevel::kInfo, "auth: a bearer token is required on every call but the health probes");
  }
  if (tokens.has_management_token()) {
    Log(LogLevel::kInfo, "auth: the repository API requires the management token");
  }
  if (tls != nullptr) {
    Log(LogLevel::kInfo, std::string("tls: gRPC and HTTP serve TLS only (1.2 or newer); client certificates ") +
                             (tls->require_client_certificates()
                                  ? "required, verified against " + options.tls_client_ca_file
                                  : "not requested") +
                             "; metrics stay plain HTTP");
  }
}

// The start-up models' outcome, one line each.
size_t LogStartupModels(const ModelManager& models) {
  size_t ready = 0;
  for (const auto& s : models.Index()) {
    if (s.state == ModelState::kReady) {
      ++ready;
      Log(LogLevel::kInfo, "model " + s.name + " version " + std::to_string(s.version) + " READY");
    } else if (!s.reason.empty() && !s.not_loaded) {
      Log(LogLevel::kWarning, "model " + s.name + " " + ModelStateName(s.state) + ": " + s.reason);
    }
  }
  return ready;
}

PoolOptions PoolOptionsFor(const ServerOptions& options) {
  // Without --interpreters, one per CPU the container's limit (cgroup quota) allows.
  const size_t cores = HardwareCores();
  const CpuLimit cpu = DetectCpuLimit(cores);
  PoolOptions pool;
  pool.interpreters = options.interpreters > 0 ? options.interpreters : cpu.cpus;
  pool.intra_op_threads = DefaultIntraOpThreads(pool.interpreters, cpu.cpus);
  pool.cache_dir = options.cache_dir;
  pool.compile_cache_dir = options.compile_cache_dir;
  Log(LogLevel::kInfo, "interpreters: " + std::to_string(pool.interpreters) +
                           (options.interpreters > 0 ? " (--interpreters)" : " (one per CPU)") +
                           "; " + DescribeCpuLimit(cpu, cores));
  return pool;
}

ModelManager::Options ModelOptionsFor(const ServerOptions& options, ResponseCache* cache,
                                     Quarantine* quarantine) {
  ModelManager::Options models;
  models.repository = options.model_repository;
  models.explicit_control = options.explicit_model_control;
  models.on_demand = options.on_demand;
  models.startup_models = options.load_models;
  models.budget = {options.model_memory_budget_bytes, options.max_loaded_models};
  models.serving = options.serving;
  models.archive_limits = ArchiveLimits{static_cast<uint64_t>(options.max_archive_bytes)};
  models.response_cache = cache;
  models.quarantine = quarantine;
  return models;
}

}  // namespace

// Every part, declared in the order Start builds them: destroyed in the
// reverse order, each before what it uses.
struct Server::Parts {
  // Memory the allocator holds free for a second goes back to the kernel: a
  // refused oversized gRPC message is read whole first (docs/operations.md).
  std::unique_ptr<IdleMemoryReturner> memory_returner;
  std::shared_ptr<const TlsCredentials> tls;  // null: plain text
  std::unique_ptr<AccessTokens> tokens;
  std::unique_ptr<InterpreterPool> pool;
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<ResponseCache> response_cache;  // null: --response-cache-bytes 0
  std::unique_ptr<MetricsServer> metrics;         // null: --no-metrics
  // After the metrics (its export counters are there) and before the models
  // and frontends, which go first: their requests' spans have ended by then.
  std::unique_ptr<Tracing> tracing;  // null: --tracing off, or not built in
  // Metrics declared by models' Python: on /metrics with the server's, or
  // (--no-metrics) kept unseen. Before any model loads.
  std::unique_ptr<PythonMetrics> python_metrics;
  std::unique_ptr<CompileMetrics> compile_metrics;
  std::unique_ptr<Quarantine> quarantine;
  std::unique_ptr<ModelManager> models;
  std::unique_ptr<PythonServices> python_services;
  std::unique_ptr<InferenceServer> core;
  std::unique_ptr<GrpcFrontend> grpc_frontend;
  std::unique_ptr<grpc::Server> grpc_server;
  // After the gRPC server: it stops accepting before gRPC shuts down.
  std::unique_ptr<GrpcConnectionLimit> grpc_connections;
  int grpc_port = 0;
  int grpc_max_connection_age_seconds = 0;  // StepAside waits for connections this old
  std::unique_ptr<HttpFrontend> http;  // null: --no-http
};

Server::Server(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

// --tracing: the exporter, with its exported and dropped spans counted on
// /metrics (manypy_trace_spans_total{result}) when there is one.
static Status StartTracingPart(const ServerOptions& options, MetricsServer* metrics,
                        std::unique_ptr<Tracing>* out) {
  if (!options.tracing.enabled) {
    Log(LogLevel::kInfo, TracingBuiltIn() ? "tracing: off (--tracing turns it on)"
                                          : "tracing: not built in: " + TracingUnavailableReason());
    return Status::Ok();
  }
  TracingOptions tracing = options.tracing;
  if (metrics != nullptr) {
    auto& spans = prometheus::BuildCounter()
                      .Name("manypy_trace_spans_total")
                      .Help("Trace spans handed to the OTLP exporter, by result: exported (the "
                            "collector took them) or dropped (it was unreachable or refused them)")
                      .Register(*metrics->registry());
    prometheus::Counter* exported = &spans.Add({{"result", "exported"}});
    prometheus::Counter* dropped = &spans.Add({{"result", "dropped"}});
    tracing.on_export = [exported, dropped](int64_t e, int64_t d) {
      if (e > 0) exported->Increment(static_cast<double>(e));
      if (d > 0) dropped->Increment(static_cast<double>(d));
    };
  }
  auto started = StartTracing(tracing);
  if (!started.ok()) return started.status();
  *out = std::move(*started);
  Log(LogLevel::kInfo, "tracing: " + (*out)->Describe());
  return Status::Ok();
}

Server::~Server() = default;

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                SupervisedChild* supervised) {
  std::unique_ptr<Server> server(new Server(std::make_unique<Parts>()));
  MANYPY_RETURN_IF_ERROR(server->StartParts(options, supervised));
  NotifySupervisorReady(supervised);
  // Beside an older process (SIGHUP), scrapes are ours from the switch on.
  if (server->parts_->metrics) server->parts_->metrics->StartAccepting();
  return server;
}

Status Server::StartParts(const ServerOptions& flags, SupervisedChild* supervised) {
  Parts& p = *parts_;
  const OpenFileLimit files = RaiseOpenFileLimit();
  p.memory_returner = IdleMemoryReturner::Start({});
  ServerOptions options = flags;  // the connection limits fitted to the descriptors below
  // Token and TLS files are read once, before anything listens: a bad one stops the start.
  auto tokens = AccessTokens::Load(options.auth_token_file, options.management_token_file);
  if (!tokens.ok()) return tokens.status();
  p.tokens = std::make_unique<AccessTokens>(std::move(*tokens));
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty() ||
      !options.tls_client_ca_file.empty()) {
    auto loaded = TlsCredentials::Load(options.tls_cert_file, options.tls_key_file,
                                       options.tls_client_ca_file);
    if (!loaded.ok()) return loaded.status();
    p.tls = std::make_shared<const TlsCredentials>(std::move(*loaded));
  }
  LogCredentials(options, *p.tokens, p.tls.get());

  PoolOptions pool_options = PoolOptionsFor(options);
  auto pool = [&] {
    QuietLibraryWarnings quiet("interpreters started");
    return InterpreterPool::Create(pool_options);
  }();
  if (!pool.ok()) return CannotStart("cannot start the interpreter pool: " + pool.status().ToString());
  p.pool = std::move(*pool);
  LogMathLibraries(p.pool->size());
  // Each interpreter's faulthandler, chained to the crash handler main installed.
  if (Status dumps = EnablePythonStackDumps(p.pool.get()); !dumps.ok()) {
    return CannotStart(dumps.ToString());
  }
  Dispatcher::Options dispatch;
  dispatch.slots = p.pool->size();
  dispatch.run_here_below = std::chrono::microseconds(options.run_to_completion_below_us);
  dispatch.run_here_quiet = std::chrono::microseconds(options.run_to_completion_quiet_us);
  p.dispatcher = std::make_unique<Dispatcher>(dispatch);

  if (options.response_cache_bytes > 0) {
    p.response_cache = std::make_unique<ResponseCache>(options.response_cache_bytes);
    Log(LogLevel::kInfo, "response cache: " + std::to_string(options.response_cache_bytes) +
                             " bytes, for models with response_cache");
  }
  if (options.metrics) {
    const int inherited = supervised != nullptr && !supervised->metrics_fds.empty()
                              ? supervised->metrics_fds.front()
                              : -1;
    const bool beside_another = supervised != nullptr && supervised->switching;
    auto started = MetricsServer::Start({options.metrics_address, options.metrics_port, inherited,
                                         /*accept_now=*/!beside_another},
                                        p.dispatcher.get(), p.response_cache.get());
    if (!started.ok()) return CannotStart(started.status().ToString());
    p.metrics = std::move(*started);
    if (supervised != nullptr) {
      AddRestartMetrics(p.metrics->registry(), supervised->restarts, supervised->reloads);
    }
    printf("manypy-server: metrics listening on %s\n", p.metrics->url().c_str());
  }
  if (Status traced = StartTracingPart(options, p.metrics.get(), &p.tracing); !traced.ok()) return traced;
  // The `manypy` module a model's Python imports (the archive's mock of it is
  // replaced) and the model runtime: before any archive loads.
  if (Status installed = PythonServices::Install(p.pool.get()); !installed.ok()) {
    return CannotStart(installed.ToString());
  }
  if (Status ready = PythonModel::PrepareInterpreters(p.pool.get()); !ready.ok()) {
    return CannotStart(ready.ToString());
  }
  prometheus::Registry* registry = p.metrics ? p.metrics->registry() : nullptr;
  p.python_metrics = std::make_unique<PythonMetrics>(registry);
  p.compile_metrics = std::make_unique<CompileMetrics>(registry);

  auto quarantine = Quarantine::Open({options.crash_state_dir, options.clear_quarantine},
                                     static_cast<int64_t>(time(nullptr)));
  if (quarantine.ok()) {
    p.quarantine = std::move(*quarantine);
    if (options.clear_quarantine) Log(LogLevel::kInfo, "crashes: every quarantine lifted (--clear-quarantine)");
    for (const auto& [name, reason] : p.quarantine->Reasons()) {
      Log(LogLevel::kWarning, "model " + name + " " + reason);
    }
  } else {
    // Not a reason to stay down: crashes are still reported and restarted.
    Log(LogLevel::kWarning, quarantine.status().message() +
                                ": crashes are reported but not recorded, and no model is quarantined");
  }
  auto models = ModelManager::Open(p.pool.get(), p.dispatcher.get(),
                                   ModelOptionsFor(options, p.response_cache.get(),
                                                   p.quarantine.get()));
  if (!models.ok()) return CannotStart(models.status().ToString());
  p.models = std::move(*models);
  // Before the start-up models load: their warm-up may call another model.
  p.python_services = std::make_unique<PythonServices>(p.models.get(), p.dispatcher.get());
  p.models->LoadStartupModels();
  const size_t ready = LogStartupModels(*p.models);

  p.core = std::make_unique<InferenceServer>(
      p.models.get(), p.dispatcher.get(),
      InferenceServer::Options{options.explicit_model_control || options.on_demand, *p.tokens,
                               {options.allow_client_shm, options.allow_client_shm_remote}});
  if (options.allow_client_shm) {
    Log(LogLevel::kInfo, std::string("client system shared memory allowed, ") +
                             (options.allow_client_shm_remote
                                  ? "over any connection"
                                  : "over plain connections from this host"));
  }
  // The models of the start are open: what is left bounds the connections.
  const int64_t in_use = OpenDescriptors();
  const ConnectionLimits fitted = FitConnectionLimits(
      files.soft, in_use, options.http ? options.http_max_connections : 0, options.grpc_max_connections);
  Log(fitted.clamped || !files.error.empty() ? LogLevel::kWarning : LogLevel::kInfo,
      DescribeDescriptors(files, in_use, fitted, options.http ? options.http_max_connections : 0,
                          options.grpc_max_connections));
  options.http_max_connections = std::max(1, fitted.http);
  options.grpc_max_connections = fitted.grpc;
  StartupStop::EndBeforeServing();  // a stop signal from here drains what was accepted
  MANYPY_RETURN_IF_ERROR(StartGrpc(options, supervised));
  // HTTP/REST: the same request path; its line comes before the final "listening on".
  if (options.http) {
    HttpFrontend::Options http;
    http.address = options.http_address;
    http.port = options.http_port;
    http.io_threads = kHttpIoThreads;
    http.limits = {static_cast<uint64_t>(options.max_message_bytes),
                   std::chrono::seconds(options.http_read_timeout_seconds)};
    http.max_connections = options.http_max_connections;
    http.tls = p.tls;
    if (supervised != nullptr && !supervised->http_fds.empty()) {
      http.listen_fd = supervised->http_fds.front();
    }
    auto started = HttpFrontend::Start(p.core.get(), std::move(http));
    if (!started.ok()) return CannotStart(started.status().ToString());
    p.http = std::move(*started);
    printf("manypy-server: HTTP listening on %s:%d\n", options.http_address.c_str(), p.http->port());
  }
  p.grpc_server->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  printf("manypy-server: listening on %s:%d, %zu model(s) ready, %zu interpreters\n",
         options.grpc_address.c_str(), p.grpc_port, ready, p.pool->size());
  fflush(stdout);
  return Status::Ok();
}

Status Server::StartGrpc(const ServerOptions& options, SupervisedChild* supervised) {
  Parts& p = *parts_;
  p.grpc_frontend = std::make_unique<GrpcFrontend>(p.core.get());
  grpc::EnableDefaultHealthCheckService(true);
  // grpc 1.51 cannot bound its connections: the port is bound here, and its
  // connections reach gRPC through an external acceptor (with the port's
  // credentials), at most --grpc-max-connections open at once.
  auto sockets = supervised != nullptr && !supervised->grpc_fds.empty()
                     ? StatusOr<ListeningSockets>(ListeningSockets::Adopt(supervised->grpc_fds))
                     : ListeningSockets::Listen(options.grpc_address, options.grpc_port);
  if (!sockets.ok()) return CannotStart(sockets.status().message());
  p.grpc_port = sockets->port();
  p.grpc_max_connection_age_seconds = options.grpc_max_connection_age_seconds;
  grpc::ServerBuilder builder;
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      GrpcServerCredentials(p.tls.get()));
  builder.RegisterService(p.grpc_frontend.get());
  builder.experimental().SetInterceptorCreators(MalformedRequestRefusals(p.core.get()));
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // Per HTTP/2 connection.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.grpc_max_concurrent_streams);
  // A graceful GOAWAY at that age: what moves clients off a process that
  // steps aside (StepAside) without a failed call. Server::Shutdown's GOAWAY
  // cannot: grpc 1.51 cancels the calls that cross it (zombied, CANCELLED).
  if (options.grpc_max_connection_age_seconds > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               options.grpc_max_connection_age_seconds * 1000);
  }
  p.grpc_server = builder.BuildAndStart();
  if (p.grpc_server == nullptr) return CannotStart("cannot start the gRPC server");
  // Started after the server: gRPC drops connections handed to it before.
  auto limit = GrpcConnectionLimit::Start(std::move(*sockets), std::move(acceptor),
                                          options.grpc_max_connections);
  if (!limit.ok()) return CannotStart(limit.status().message());
  p.grpc_connections = std::move(*limit);
  p.grpc_server->GetHealthCheckService()->SetServingStatus(true);
  return Status::Ok();
}

size_t Server::Drain(std::chrono::seconds grace) {
  Parts& p = *parts_;
  p.core->StartDraining();  // both frontends' readiness answers false from here
  p.grpc_server->GetHealthCheckService()->SetServingStatus(false);
  // New requests are refused; queued and running ones may finish until the deadline.
  size_t stuck = p.core->Drain(std::chrono::steady_clock::now() + grace);
  if (p.http) p.http->Stop();  // every inference is answered: write the last replies, close
  // Every inference call is answered now; this ends the remaining calls (streams).
  p.grpc_connections->Stop();
  p.grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return stuck;
}

size_t Server::StepAside(std::chrono::seconds grace) {
  Parts& p = *parts_;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  // The sockets stay open in the supervisor and the new process, which
  // accepts every connection from here on.
  p.grpc_connections->Stop();
  if (p.http) p.http->StopAccepting();
  if (p.metrics) p.metrics->StopAccepting();
  // Serving as usual until each gRPC connection reaches its age and its
  // client moves (--grpc-max-connection-age); then, or at the grace
  // period's end, GOAWAY to what is left and a drain of what is in flight.
  if (p.grpc_max_connection_age_seconds > 0) {
    size_t open = p.grpc_connections->OpenAfterStop();
    if (open > 0) {
      Log(LogLevel::kInfo, std::to_string(open) + " gRPC connection(s) open: serving them until "
                               "their clients move (--grpc-max-connection-age=" +
                               std::to_string(p.grpc_max_connection_age_seconds) + ")");
    }
    while (open > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      open = p.grpc_connections->OpenAfterStop();
    }
  }
  p.grpc_server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              deadline - std::chrono::steady_clock::now()));
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
  return Drain(std::max(left, std::chrono::seconds(0)));
}

void Server::Wait() { parts_->grpc_server->Wait(); }

int Server::grpc_port() const { return parts_->grpc_port; }

int Server::http_port() const { return parts_->http ? parts_->http->port() : 0; }

}  // namespace manypy

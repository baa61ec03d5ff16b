// manypy-server: fills ServerOptions, builds the pool, the dispatcher, the
// model manager and the gRPC frontend, then serves until SIGTERM/SIGINT and
// drains. Shutdown always ends: after the grace period stuck calls are
// abandoned and the process exits with status 1.
#include <ATen/Parallel.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include "interpreters/pool.h"
#include "server/core/python_services.h"
#include "server/metrics/compile_metrics.h"
#include "server/metrics/python_metrics.h"
#include "interpreters/thread_policy.h"
#include "server/allocator_info.h"
#include "server/auth/access_tokens.h"
#include "server/blas_info.h"
#include "server/cpu_quota.h"
#include "server/grpc/grpc_connection_limit.h"
#include "server/core/inference_server.h"
#include "server/grpc/grpc_frontend.h"
#include "server/grpc/grpc_tls.h"
#include "server/grpc/listening_sockets.h"
#include "server/http/http_frontend.h"
#include "server/inference/dispatcher.h"
#include "server/log.h"
#include "server/metrics/metrics_server.h"
#include "server/lifecycle/model_manager.h"
#include "server/lifecycle/python_model.h"
#include "server/server_options.h"

namespace {

constexpr const char* kServiceName = "inference.GRPCInferenceService";

int Fail(const std::string& message) {
  manypy::Log(manypy::LogLevel::kError, message);
  return 1;
}

void LogMathLibraries(size_t interpreters) {
  using manypy::Log;
  using manypy::LogLevel;
  int intra = at::get_num_threads();
  manypy::LimitBlasThreads(intra);
  manypy::BlasInfo blas = manypy::DetectBlas();
  std::string blas_threads = blas.follows_openmp ? "threads follow libtorch's (OpenMP)"
                             : blas.threads > 0  ? std::to_string(blas.threads) + " thread(s)"
                                                 : "threads unknown";
  Log(LogLevel::kInfo, "math: BLAS " + blas.name + (blas.path.empty() ? "" : " (" + blas.path + ")") +
                           ", " + blas_threads + "; libtorch " + std::to_string(intra) +
                           " intra-op thread(s) per interpreter x " + std::to_string(interpreters) +
                           " interpreter(s)");
  Log(LogLevel::kInfo, "memory: " + manypy::MallocName());
  if (blas.reference) {
    Log(LogLevel::kWarning,
        "libtorch calls the reference (netlib) BLAS: linear layers, attention and LSTMs run up to "
        "19x slower than with OpenBLAS; install libopenblas0-openmp (tools/debian-packages.txt)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace manypy;
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex's deadlock
  // detection on: every lock gRPC takes then updates a process-wide lock graph
  // (measured: 3-4% of the server's CPU on small requests). Off, as in release builds.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool help = false;
  auto options = ParseServerOptions(argc, argv, &help);
  if (!options.ok()) {
    fprintf(stderr, "manypy-server: %s\n", options.status().message().c_str());
    return 2;
  }
  if (help) {
    fputs(ServerUsage().c_str(), stdout);
    return 0;
  }
  InitLibraryLogging(argv[0]);
  SetLogLevel(options->log_level);
  SetLogFormat(options->log_format);
  // The model runtime writes the line a model's os._exit leaves (Python, in
  // each interpreter, with no way to call back here): it reads the format
  // from the environment, which the interpreters copy when the pool starts.
  setenv("MANYPY_LOG_FORMAT", options->log_format.c_str(), 1);
  SetAccessLogFraction(options->access_log_fraction);
  // Token files are read once, before anything listens: a bad one stops the start.
  auto tokens = AccessTokens::Load(options->auth_token_file, options->management_token_file);
  if (!tokens.ok()) {
    fprintf(stderr, "manypy-server: %s\n", tokens.status().message().c_str());
    return 2;
  }
  if (!options->auth_token_file.empty()) {
    Log(LogLevel::kInfo, "auth: a bearer token is required on every call but the health probes");
  }
  if (tokens->has_management_token()) {
    Log(LogLevel::kInfo, "auth: the repository API requires the management token");
  }
  // TLS files too: a missing, unreadable or mismatched certificate or key stops the start.
  std::shared_ptr<const TlsCredentials> tls;
  if (!options->tls_cert_file.empty() || !options->tls_key_file.empty() ||
      !options->tls_client_ca_file.empty()) {
    auto loaded = TlsCredentials::Load(options->tls_cert_file, options->tls_key_file,
                                       options->tls_client_ca_file);
    if (!loaded.ok()) {
      fprintf(stderr, "manypy-server: %s\n", loaded.status().message().c_str());
      return 2;
    }
    tls = std::make_shared<const TlsCredentials>(std::move(*loaded));
    Log(LogLevel::kInfo, std::string("tls: gRPC and HTTP serve TLS only (1.2 or newer); client certificates ") +
                             (tls->require_client_certificates()
                                  ? "required, verified against " + options->tls_client_ca_file
                                  : "not requested") +
                             "; metrics stay plain HTTP");
  }
  // Every thread inherits this mask; only main receives the stop signals (sigwait).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Without --interpreters, one per CPU the container's limit (cgroup quota) allows.
  const size_t cores = HardwareCores();
  const CpuLimit cpu = DetectCpuLimit(cores);
  PoolOptions pool_options;
  pool_options.interpreters = options->interpreters > 0 ? options->interpreters : cpu.cpus;
  pool_options.intra_op_threads = DefaultIntraOpThreads(pool_options.interpreters, cpu.cpus);
  Log(LogLevel::kInfo, "interpreters: " + std::to_string(pool_options.interpreters) +
                           (options->interpreters > 0 ? " (--interpreters)" : " (one per CPU)") +
                           "; " + DescribeCpuLimit(cpu, cores));
  pool_options.cache_dir = options->cache_dir;
  pool_options.compile_cache_dir = options->compile_cache_dir;
  auto pool = [&] {
    QuietLibraryWarnings quiet("interpreters started");
    return InterpreterPool::Create(pool_options);
  }();
  if (!pool.ok()) return Fail("cannot start the interpreter pool: " + pool.status().ToString());

  LogMathLibraries((*pool)->size());

  Dispatcher dispatcher({(*pool)->size()});
  // Outlives the model manager (whose models fill it) and the metrics.
  std::unique_ptr<ResponseCache> response_cache;
  if (options->response_cache_bytes > 0) {
    response_cache = std::make_unique<ResponseCache>(options->response_cache_bytes);
    Log(LogLevel::kInfo, "response cache: " + std::to_string(options->response_cache_bytes) +
                             " bytes, for models with response_cache");
  }
  // Metrics: before any model loads; destroyed after the model manager.
  std::unique_ptr<MetricsServer> metrics;
  if (options->metrics) {
    auto started = MetricsServer::Start({options->metrics_address, options->metrics_port},
                                        &dispatcher, response_cache.get());
    if (!started.ok()) return Fail(started.status().ToString());
    metrics = std::move(*started);
    printf("manypy-server: metrics listening on %s\n", metrics->url().c_str());
  }
  // The `manypy` module a model's Python imports (the archive's mock of it is
  // replaced), and its metrics (declared as the model imports): before any
  // model loads. On /metrics with the server's, or (--no-metrics) kept unseen.
  if (Status installed = PythonServices::Install(pool->get()); !installed.ok()) {
    return Fail(installed.ToString());
  }
  if (Status ready = PythonModel::PrepareInterpreters(pool->get()); !ready.ok()) {
    return Fail(ready.ToString());
  }
  PythonMetrics python_metrics(metrics ? metrics->registry() : nullptr);
  CompileMetrics compile_metrics(metrics ? metrics->registry() : nullptr);
  ModelManager::Options model_options;
  model_options.repository = options->model_repository;
  model_options.explicit_control = options->explicit_model_control;
  model_options.on_demand = options->on_demand;
  model_options.startup_models = options->load_models;
  model_options.budget = {options->model_memory_budget_bytes, options->max_loaded_models};
  model_options.serving = options->serving;
  model_options.archive_limits = ArchiveLimits{static_cast<uint64_t>(options->max_archive_bytes)};
  model_options.response_cache = response_cache.get();
  auto models = ModelManager::Create(pool->get(), &dispatcher, std::move(model_options));
  if (!models.ok()) return Fail(models.status().ToString());
  size_t ready = 0;
  for (const auto& s : (*models)->Index()) {
    if (s.state == ModelState::kReady) {
      ++ready;
      Log(LogLevel::kInfo, "model " + s.name + " version " + std::to_string(s.version) + " READY");
    } else if (!s.reason.empty() && !s.not_loaded) {
      Log(LogLevel::kWarning, "model " + s.name + " " + ModelStateName(s.state) + ": " + s.reason);
    }
  }

  PythonServices python_services(models->get(), &dispatcher);
  InferenceServer core(models->get(), &dispatcher,
                       {options->explicit_model_control || options->on_demand, *tokens,
                        {options->allow_client_shm, options->allow_client_shm_remote}});
  if (options->allow_client_shm) {
    Log(LogLevel::kInfo, std::string("client system shared memory allowed, ") +
                             (options->allow_client_shm_remote
                                  ? "over any connection"
                                  : "over plain connections from this host"));
  }
  GrpcFrontend frontend(&core);
  grpc::EnableDefaultHealthCheckService(true);
  // grpc 1.51 cannot bound its connections: the port is bound here, and its
  // connections reach gRPC through an external acceptor (with the port's
  // credentials), at most --grpc-max-connections open at once.
  auto sockets = ListeningSockets::Listen(options->grpc_address, options->grpc_port);
  if (!sockets.ok()) return Fail(sockets.status().message());
  const int port = sockets->port();
  grpc::ServerBuilder builder;
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      GrpcServerCredentials(tls.get()));
  builder.RegisterService(&frontend);
  builder.SetMaxReceiveMessageSize(options->max_message_bytes);
  builder.SetMaxSendMessageSize(options->max_message_bytes);
  // Per HTTP/2 connection.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options->grpc_max_concurrent_streams);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return Fail("cannot start the gRPC server");
  // Started after the server (gRPC drops connections handed to it before), and
  // declared after it: on every return it stops accepting before gRPC shuts down.
  auto limit_started = GrpcConnectionLimit::Start(std::move(*sockets), std::move(acceptor),
                                                  options->grpc_max_connections);
  if (!limit_started.ok()) return Fail(limit_started.status().message());
  std::unique_ptr<GrpcConnectionLimit> grpc_connections = std::move(*limit_started);
  auto* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  // HTTP/REST: the same request path; its line comes before the final "listening on".
  std::unique_ptr<HttpFrontend> http;
  if (options->http) {
    auto started = HttpFrontend::Start(
        &core, {options->http_address, options->http_port, 2,
                        {static_cast<uint64_t>(options->max_message_bytes), std::chrono::seconds(30)},
                        options->http_max_connections, tls});
    if (!started.ok()) return Fail(started.status().ToString());
    http = std::move(*started);
    printf("manypy-server: HTTP listening on %s:%d\n", options->http_address.c_str(), http->port());
  }
  health->SetServingStatus(kServiceName, true);
  printf("manypy-server: listening on %s:%d, %zu model(s) ready, %zu interpreters\n",
         options->grpc_address.c_str(), port, ready, (*pool)->size());
  fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log(LogLevel::kInfo, std::string(strsignal(signal_number)) +
                           ": draining in-flight requests (grace period " +
                           std::to_string(options->grace_period_seconds) + " s)");
  core.StartDraining();  // both frontends' readiness answers false from here
  health->SetServingStatus(false);
  const auto grace = std::chrono::seconds(options->grace_period_seconds);
  // A backstop: whatever hangs (a native call holding a GIL, gRPC), the
  // process ends shortly after the grace period.
  std::thread([grace] {
    std::this_thread::sleep_for(grace + std::chrono::seconds(4));
    Log(LogLevel::kError, "shutdown did not finish within the grace period; exiting");
    _exit(1);
  }).detach();
  // New requests are refused; queued and running ones may finish until the deadline.
  size_t stuck = core.Drain(std::chrono::steady_clock::now() + grace);
  if (http) http->Stop();  // every inference is answered: write the last replies, close
  // Every inference call is answered now; this ends the remaining calls (streams).
  grpc_connections->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  if (stuck > 0) {
    Log(LogLevel::kError, std::to_string(stuck) +
                              " model call(s) still running after the grace period were "
                              "abandoned (their clients got UNAVAILABLE); exiting without unloading");
    fflush(stdout);
    fflush(stderr);
    _exit(1);
  }
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

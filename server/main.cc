// manypy-server: fills ServerOptions, builds the pool, the model manager and
// the gRPC frontend, then serves until SIGTERM/SIGINT and drains.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <chrono>
#include <cstdio>

#include "interpreters/pool.h"
#include "server/executor.h"
#include "server/grpc_frontend.h"
#include "server/log.h"
#include "server/model_manager.h"
#include "server/server_options.h"

namespace {

constexpr const char* kServiceName = "inference.GRPCInferenceService";

int Fail(const std::string& message) {
  manypy::Log(manypy::LogLevel::kError, message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace manypy;
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
  SetLogLevel(options->log_level);
  // Every thread inherits this mask; only main receives the stop signals (sigwait).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  PoolOptions pool_options;
  pool_options.interpreters = options->interpreters;
  pool_options.cache_dir = options->cache_dir;
  auto pool = InterpreterPool::Create(pool_options);
  if (!pool.ok()) return Fail("cannot start the interpreter pool: " + pool.status().ToString());

  auto models = ModelManager::Create(
      pool->get(), {options->model_repository, options->explicit_model_control, options->load_models});
  if (!models.ok()) return Fail(models.status().ToString());
  size_t ready = 0;
  for (const auto& s : (*models)->Index()) {
    if (s.state == ModelState::kReady) {
      ++ready;
      Log(LogLevel::kInfo, "model " + s.name + " version " + std::to_string(s.version) + " READY");
    } else if (!s.reason.empty()) {
      Log(LogLevel::kWarning, "model " + s.name + " " + ModelStateName(s.state) + ": " + s.reason);
    }
  }

  Executor executor((*pool)->size());
  GrpcFrontend frontend(models->get(), &executor,
                        {(*pool)->size(), options->explicit_model_control});
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  std::string address = options->grpc_address + ":" + std::to_string(options->grpc_port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&frontend);
  builder.SetMaxReceiveMessageSize(options->max_message_bytes);
  builder.SetMaxSendMessageSize(options->max_message_bytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return Fail("cannot listen on " + address);
  auto* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(kServiceName, true);
  printf("manypy-server: listening on %s:%d, %zu model(s) ready, %zu interpreters\n",
         options->grpc_address.c_str(), port, ready, (*pool)->size());
  fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log(LogLevel::kInfo, std::string(strsignal(signal_number)) +
                           ": draining in-flight requests (grace period " +
                           std::to_string(options->grace_period_seconds) + " s)");
  frontend.StartDraining();
  health->SetServingStatus(false);
  // Stops accepting calls, lets in-flight ones finish until the deadline, then cancels the rest.
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::seconds(options->grace_period_seconds));
  server->Wait();
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

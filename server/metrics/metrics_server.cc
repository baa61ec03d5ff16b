#include "server/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "server/metrics/prometheus_observer.h"
#include "server/metrics/scrape_collector.h"

namespace manypy {
namespace {

// A listening IPv4/IPv6 socket on address:port (port 0: the kernel picks), or -1.
int Listen(const std::string& address, int port, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(address.empty() ? nullptr : address.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    *error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      *error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
}

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const char* status, const char* type, const std::string& body) {
  return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

}  // namespace

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const Options& options,
                                                              const Dispatcher* dispatcher,
                                                              const ResponseCache* response_cache) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->address_ = options.address;
  std::string error;
  server->listen_fd_ =
      options.listen_fd >= 0 ? options.listen_fd : Listen(options.address, options.port, &error);
  if (server->listen_fd_ < 0) {
    return Unavailable("cannot serve metrics on " + options.address + ":" +
                       std::to_string(options.port) + ": " + error);
  }
  server->port_ = BoundPort(server->listen_fd_);
  if (pipe2(server->wake_, O_CLOEXEC) != 0) {
    close(server->listen_fd_);
    return Unavailable("cannot serve metrics: no pipe for its thread");
  }
  server->registry_ = std::make_shared<prometheus::Registry>();
  server->collector_ = std::make_shared<ScrapeCollector>(dispatcher, response_cache);
  server->observer_ = std::make_unique<PrometheusObserver>(server->registry_.get(),
                                                           dispatcher->slots());
  SetInferenceObserver(server->observer_.get());
  if (options.accept_now) server->StartAccepting();
  return server;
}

void MetricsServer::StartAccepting() {
  if (accepting_ || stopping_) return;
  accepting_ = true;
  thread_ = std::thread([this] { Serve(); });
}

void MetricsServer::StopAccepting() {
  stopping_ = true;
  if (!thread_.joinable()) return;
  const char wake = 0;
  if (write(wake_[1], &wake, 1) < 0) shutdown(listen_fd_, SHUT_RDWR);  // wakes Serve's poll
  thread_.join();
}

MetricsServer::~MetricsServer() {
  StopAccepting();
  close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
  if (GetInferenceObserver() == observer_.get()) SetInferenceObserver(nullptr);
}

std::string MetricsServer::url() const {
  return "http://" + address_ + ":" + std::to_string(port_) + "/metrics";
}

std::string MetricsServer::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : collector_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

void MetricsServer::Serve() {
  while (!stopping_) {
    pollfd ready[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(ready, 2, -1) <= 0 || (ready[1].revents & POLLIN) != 0) continue;
    // Non-blocking (an inherited socket is): another process may have taken the connection.
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) return;
      continue;
    }
    timeval timeout{5, 0};  // a silent client cannot hold the endpoint
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    std::string request;
    char buffer[4096];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
      ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
    }
    size_t line_end = request.find("\r\n");
    std::string line = request.substr(0, line_end);
    bool get = line.rfind("GET ", 0) == 0, head = line.rfind("HEAD ", 0) == 0;
    std::string path = line.substr(line.find(' ') + 1);
    path = path.substr(0, path.find(' '));
    path = path.substr(0, path.find('?'));
    if ((get || head) && path == "/metrics") {
      std::string response =
          Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", Scrape());
      if (head) response = response.substr(0, response.find("\r\n\r\n") + 4);
      SendAll(fd, response);
    } else if (get || head) {
      SendAll(fd, Response("404 Not Found", "text/plain", "see /metrics\n"));
    } else {
      SendAll(fd, Response("405 Method Not Allowed", "text/plain", "GET /metrics\n"));
    }
    close(fd);
  }
}

}  // namespace manypy

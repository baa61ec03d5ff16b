#include "server/http/http_frontend.h"

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/ssl.hpp>

#include "common/thread_name.h"
#include "server/http/accept_backoff.h"
#include "server/http/http_tls.h"
#include "server/log.h"
#include "server/open_files.h"

namespace manypy {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpFrontend::Io {
  explicit Io(int threads)
      : context(threads), acceptor(net::make_strand(context)), retry(acceptor.get_executor()) {}
  net::io_context context;
  tcp::acceptor acceptor;
  // On the acceptor's strand, as the backoff: the wait after accept() ran out of descriptors.
  net::steady_timer retry;
  AcceptBackoff backoff;
  std::unique_ptr<net::ssl::context> tls;  // null: plain HTTP
};

HttpFrontend::HttpFrontend(InferenceServer* server, Options options)
    : options_(std::move(options)),
      router_(server),
      connections_(options_.max_connections),
      io_(std::make_unique<Io>(std::max(1, options_.io_threads))) {}

StatusOr<std::unique_ptr<HttpFrontend>> HttpFrontend::Start(InferenceServer* server,
                                                          Options options) {
  std::unique_ptr<HttpFrontend> f(new HttpFrontend(server, std::move(options)));
  boost::system::error_code ec;
  auto address = net::ip::make_address(f->options_.address, ec);
  if (ec) return InvalidArgument("bad HTTP address '" + f->options_.address + "': " + ec.message());
  tcp::endpoint endpoint(address, static_cast<unsigned short>(f->options_.port));
  if (f->options_.tls != nullptr) {
    auto tls = MakeHttpTlsContext(*f->options_.tls);
    if (!tls.ok()) return tls.status();
    f->io_->tls = std::move(*tls);
  }
  auto& acceptor = f->io_->acceptor;
  std::string where = f->options_.address + ":" + std::to_string(f->options_.port);
  if (f->options_.listen_fd >= 0) {
    // Inherited, listening already: its family picks the protocol.
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    getsockname(f->options_.listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
    if (acceptor.assign(bound.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), f->options_.listen_fd, ec);
        ec) {
      return Unavailable("HTTP: cannot accept on the inherited socket: " + ec.message());
    }
  } else {
    if (acceptor.open(endpoint.protocol(), ec); ec) return Unavailable("HTTP: cannot open " + where);
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (acceptor.bind(endpoint, ec); ec) {
      return Unavailable("HTTP: cannot listen on " + where + ": " + ec.message());
    }
    if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
      return Unavailable("HTTP: cannot listen on " + where + ": " + ec.message());
    }
  }
  f->port_ = acceptor.local_endpoint().port();
  f->Accept();
  for (int i = 0; i < std::max(1, f->options_.io_threads); ++i) {
    f->threads_.emplace_back([io = f->io_.get()] {
      NameThisThread("manypy-http");  // the crash report tells a frontend thread by it
      io->context.run();
    });
  }
  return f;
}

void HttpFrontend::Accept() {
  // Each connection gets its own strand: its handlers never run concurrently.
  io_->acceptor.async_accept(net::make_strand(io_->context), [this](boost::system::error_code ec,
                                                                   tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    // A connection accepted just before StopAccepting closed the acceptor
    // is served all the same (one reply, then closed): the kernel has
    // already taken it from the queue it shares with the next process.
    const bool accepting = io_->acceptor.is_open();
    if (!ec) {
      AcceptedAgain();
      ServeAccepted(std::move(socket));
    } else if (accepting && ec.category() == boost::system::system_category() &&
               AcceptBackoff::Transient(ec.value())) {
      return WaitThenAccept(ec);
    } else if (accepting) {
      Log(LogLevel::kWarning, "HTTP accept: " + ec.message());
    }
    if (accepting) Accept();
  });
}

void HttpFrontend::WaitThenAccept(const boost::system::error_code& ec) {
  // Retrying at once would fail at once: the connection stays queued in the
  // kernel, and the loop would spin on a core logging each failure.
  const AcceptBackoff::Wait wait = io_->backoff.Failed(std::chrono::steady_clock::now());
  if (wait.say) {
    Log(LogLevel::kWarning, "HTTP: cannot accept connections: " + ec.message() +
                                " (open-file limit " + std::to_string(OpenFileSoftLimit()) +
                                "); retrying after 10 ms, doubling to 1 s, until one is accepted "
                                "(logged once, and at most once a minute)");
  }
  io_->retry.expires_after(wait.wait);
  io_->retry.async_wait([this](boost::system::error_code waited) {
    if (!waited && io_->acceptor.is_open()) Accept();
  });
}

void HttpFrontend::AcceptedAgain() {
  const int64_t failures = io_->backoff.Succeeded();
  if (failures == 0) return;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - io_->backoff.LastSaid());
  Log(LogLevel::kWarning, "HTTP: accepting connections again after " + std::to_string(failures) +
                              " failed accept(s) over " + std::to_string(took.count()) + " ms");
}

void HttpFrontend::ServeAccepted(tcp::socket socket) {
  std::shared_ptr<void> slot = connections_.TryAcquire();
  if (slot == nullptr) return RefuseConnection(std::move(socket));
  boost::system::error_code ignored;  // Nagle's delay only slows replies; serve without the option
  socket.set_option(tcp::no_delay(true), ignored);
  if (io_->tls != nullptr) {
    StartSession(std::make_shared<HttpsSession>(
                     boost::beast::ssl_stream<boost::beast::tcp_stream>(std::move(socket), *io_->tls),
                     &router_, options_.limits, in_flight_, closing_),
                 std::move(slot));
  } else {
    StartSession(std::make_shared<HttpSession>(boost::beast::tcp_stream(std::move(socket)), &router_,
                                               options_.limits, in_flight_, closing_),
                 std::move(slot));
  }
}

template <typename Session>
void HttpFrontend::StartSession(std::shared_ptr<Session> session, std::shared_ptr<void> slot) {
  session->HoldWhileOpen(std::move(slot));
  session->Start();
}

void HttpFrontend::RefuseConnection(tcp::socket socket) {
  // Closed before anything is read or written: no reply, since the bytes a reply
  // needs (plain or TLS) would be work done for a client over the limit.
  if (!refused_logged_.exchange(true)) {
    Log(LogLevel::kWarning, "HTTP: " + std::to_string(connections_.max()) +
                                " connections are open (--http-max-connections); closing new ones "
                                "until some end (logged once)");
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);  // the client reads end-of-stream
  socket.close(ignored);
}

void HttpFrontend::StopAccepting() {
  *closing_ = true;
  net::post(io_->acceptor.get_executor(), [this] {
    boost::system::error_code ignored;
    io_->acceptor.close(ignored);
    io_->retry.cancel();
  });
}

void HttpFrontend::Stop(std::chrono::milliseconds wait) {
  if (stopped_) return;
  stopped_ = true;
  StopAccepting();
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (*in_flight_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  io_->context.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

HttpFrontend::~HttpFrontend() { Stop(std::chrono::milliseconds(0)); }

}  // namespace manypy

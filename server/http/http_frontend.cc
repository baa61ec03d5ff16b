#include "server/http/http_frontend.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include "server/log.h"

namespace manypy {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpFrontend::Io {
  explicit Io(int threads) : context(threads), acceptor(net::make_strand(context)) {}
  net::io_context context;
  tcp::acceptor acceptor;
};

HttpFrontend::HttpFrontend(ModelManager* models, Options options)
    : options_(std::move(options)),
      router_(models, {options_.explicit_model_control}),
      io_(std::make_unique<Io>(std::max(1, options_.io_threads))) {}

StatusOr<std::unique_ptr<HttpFrontend>> HttpFrontend::Start(ModelManager* models, Options options) {
  std::unique_ptr<HttpFrontend> f(new HttpFrontend(models, std::move(options)));
  boost::system::error_code ec;
  auto address = net::ip::make_address(f->options_.address, ec);
  if (ec) return InvalidArgument("bad HTTP address '" + f->options_.address + "': " + ec.message());
  tcp::endpoint endpoint(address, static_cast<unsigned short>(f->options_.port));
  auto& acceptor = f->io_->acceptor;
  std::string where = f->options_.address + ":" + std::to_string(f->options_.port);
  if (acceptor.open(endpoint.protocol(), ec); ec) return Unavailable("HTTP: cannot open " + where);
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (acceptor.bind(endpoint, ec); ec) {
    return Unavailable("HTTP: cannot listen on " + where + ": " + ec.message());
  }
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return Unavailable("HTTP: cannot listen on " + where + ": " + ec.message());
  }
  f->port_ = acceptor.local_endpoint().port();
  f->Accept();
  for (int i = 0; i < std::max(1, f->options_.io_threads); ++i) {
    f->threads_.emplace_back([io = f->io_.get()] { io->context.run(); });
  }
  return f;
}

void HttpFrontend::Accept() {
  // Each connection gets its own strand: its handlers never run concurrently.
  io_->acceptor.async_accept(net::make_strand(io_->context), [this](boost::system::error_code ec,
                                                                   tcp::socket socket) {
    if (ec == net::error::operation_aborted || !io_->acceptor.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<HttpSession>(std::move(socket), &router_, options_.limits, in_flight_)->Start();
    } else {
      Log(LogLevel::kWarning, "HTTP accept: " + ec.message());
    }
    Accept();
  });
}

void HttpFrontend::Stop(std::chrono::milliseconds wait) {
  if (stopped_) return;
  stopped_ = true;
  net::post(io_->acceptor.get_executor(), [this] {
    boost::system::error_code ignored;
    io_->acceptor.close(ignored);
  });
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

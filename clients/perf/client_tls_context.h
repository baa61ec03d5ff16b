// manypy-perf's TLS context for HTTPS: TLS 1.2 or newer, the server verified
// against the CA file (or the system's roots), an optional client certificate.
// Made once per run; an asio context is thread-safe to share among senders.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include <memory>

#include "clients/cpp/tls_options.h"
#include "common/status.h"

namespace manypy::perf {

/// INVALID_ARGUMENT naming the file that cannot be read or that OpenSSL refuses.
StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(const client::TlsOptions& tls);

}  // namespace manypy::perf

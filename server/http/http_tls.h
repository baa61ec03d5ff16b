// The HTTP endpoint's TLS context (Boost.Asio over OpenSSL) from TlsCredentials:
// TLS 1.2 or newer, the server's chain and key, and, with a client CA, client
// certificates required and verified. The context is thread-safe once made.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include <memory>

#include "common/status.h"
#include "server/tls/tls_credentials.h"

namespace manypy {

/// INVALID_ARGUMENT naming what OpenSSL refused (rare: TlsCredentials::Load
/// checked the files already).
StatusOr<std::unique_ptr<boost::asio::ssl::context>> MakeHttpTlsContext(const TlsCredentials& tls);

}  // namespace manypy

#include "server/core/client_shared_memory.h"

namespace manypy {

Status ClientSharedMemory::Allowed(const WireConnection& connection) const {
  if (!options_.allow) {
    return PermissionDenied("client shared memory is off on this server: start it with "
                            "--allow-client-shm to register and use regions");
  }
  if (options_.allow_remote) return Status::Ok();
  if (connection.tls) {
    return PermissionDenied("client shared memory is refused over a TLS connection: connect "
                            "without TLS from this host, or start the server with "
                            "--allow-client-shm-remote");
  }
  if (!connection.loopback) {
    return PermissionDenied("client shared memory is refused from a connection that is not from "
                            "this host (loopback): start the server with "
                            "--allow-client-shm-remote to allow it");
  }
  return Status::Ok();
}

}  // namespace manypy

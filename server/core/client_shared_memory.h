// ClientSharedMemory: the shared-memory extension's registry and the policy
// on who may use it. Client shared memory is off unless the operator turns
// it on (--allow-client-shm, as Triton); even then a region is only
// registered or used over a plain connection from this host (loopback, no
// TLS: a process that can share memory with the server is on its machine,
// and TLS says the operator expects clients that are not), unless the
// operator also allows it remotely (--allow-client-shm-remote).
// Thread-safe (the registry locks; the policy is fixed at construction).
#pragma once

#include <string>

#include "common/status.h"
#include "server/core/wire_infer.h"
#include "server/inference/shared_memory_regions.h"

namespace manypy {

class ClientSharedMemory {
 public:
  struct Options {
    bool allow = false;         ///< --allow-client-shm
    bool allow_remote = false;  ///< --allow-client-shm-remote: over TLS or from another host too
  };
  explicit ClientSharedMemory(Options options) : options_(options) {}

  /// OK when a call on `connection` may register, list, unregister or use
  /// regions; else PERMISSION_DENIED naming the flag that would allow it.
  Status Allowed(const WireConnection& connection) const;
  bool enabled() const { return options_.allow; }

  SharedMemoryRegions& regions() { return regions_; }
  const SharedMemoryRegions& regions() const { return regions_; }

 private:
  const Options options_;
  SharedMemoryRegions regions_;
};

}  // namespace manypy

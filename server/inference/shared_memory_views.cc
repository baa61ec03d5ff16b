#include "server/inference/shared_memory_views.h"

#include <c10/core/CPUAllocator.h>

#include <cstring>

namespace manypy {

size_t SharedMemoryViews::Release() {
  size_t copied = 0;
  for (at::Storage& storage : storages_) {
    // Ours is one reference; any other is a tensor that outlives the request.
    if (storage.use_count() > 1) {
      const size_t bytes = storage.nbytes();
      at::DataPtr copy = c10::GetCPUAllocator()->allocate(bytes);
      if (bytes > 0) std::memcpy(copy.get(), storage.data(), bytes);
      // The old data pointer's deleter drops the region's mapping.
      storage.set_data_ptr(std::move(copy));
      ++copied;
    }
  }
  storages_.clear();
  return copied;
}

}  // namespace manypy

// SharedMemoryViews: the input tensors of one request that are views of a
// client's shared-memory region (no copy). When the request ends they are
// released; a view the model's Python still holds then (kept in a global, a
// state dict, a returned alias) is given a private copy of its bytes first,
// so no interpreter ever reads a region after its request: the client may
// rewrite or unregister it at once. Owned by one request; not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace manypy {

class SharedMemoryViews {
 public:
  SharedMemoryViews() = default;
  SharedMemoryViews(const SharedMemoryViews&) = delete;
  SharedMemoryViews& operator=(const SharedMemoryViews&) = delete;
  SharedMemoryViews(SharedMemoryViews&&) = default;
  SharedMemoryViews& operator=(SharedMemoryViews&&) = default;
  ~SharedMemoryViews() { Release(); }

  /// Remembers `view` (a tensor made on a region's bytes) to release later.
  void Add(const at::Tensor& view) { storages_.push_back(view.storage()); }
  /// Lets go of every view: one still referenced elsewhere has its storage
  /// moved to a private copy of the same bytes. Returns how many were copied.
  size_t Release();

 private:
  std::vector<at::Storage> storages_;
};

}  // namespace manypy

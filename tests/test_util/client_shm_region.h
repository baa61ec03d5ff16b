// ClientRegion: a POSIX shared-memory object a test makes, maps and removes,
// as a client's tritonclient.utils.shared_memory would; SetRegion puts a
// tensor in a registered region. For end-to-end tests; not thread-safe.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "proto/grpc_service.pb.h"

namespace manypy::testing {

class ClientRegion {
 public:
  explicit ClientRegion(const std::string& tag, size_t size)
      : key_("/manypy_test_" + std::to_string(getpid()) + "_" + tag), size_(size) {
    int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0) << key_;
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    data_ = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    EXPECT_NE(data_, MAP_FAILED);
    memset(data_, 0, size);
  }
  ~ClientRegion() {
    munmap(data_, size_);
    shm_unlink(key_.c_str());
  }
  ClientRegion(const ClientRegion&) = delete;
  ClientRegion& operator=(const ClientRegion&) = delete;

  const std::string& key() const { return key_; }
  char* data() const { return data_; }
  template <typename T>
  void Write(size_t offset, const std::vector<T>& values) const {
    memcpy(data_ + offset, values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> Read(size_t offset, size_t n) const {
    std::vector<T> v(n);
    memcpy(v.data(), data_ + offset, n * sizeof(T));
    return v;
  }

 private:
  std::string key_;
  size_t size_;
  char* data_;
};

/// The parameters that put an input or output in registered region `region`
/// (`offset` -1: none given, 0).
inline void SetRegion(google::protobuf::Map<std::string, inference::InferParameter>* params,
                      const std::string& region, int64_t byte_size, int64_t offset = -1) {
  (*params)["shared_memory_region"].set_string_param(region);
  (*params)["shared_memory_byte_size"].set_int64_param(byte_size);
  if (offset >= 0) (*params)["shared_memory_offset"].set_int64_param(offset);
}

}  // namespace manypy::testing

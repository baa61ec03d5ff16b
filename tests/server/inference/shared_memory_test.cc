// The shared-memory pieces below the frontends: mapping a region (offsets,
// bounds, keys), resolving an input's or output's parameters against the
// registry, and a request's views let go of (a view kept past the request
// gets a copy of its own). No server, no Python.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>

#include "server/inference/shared_memory_refs.h"
#include "server/inference/shared_memory_regions.h"
#include "server/inference/shared_memory_views.h"

namespace manypy {
namespace {

// A shared-memory object of `size` bytes whose byte i is i % 251.
class Object {
 public:
  explicit Object(size_t size) : key_("/manypy_unit_" + std::to_string(getpid())) {
    int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    char* p = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    for (size_t i = 0; i < size; ++i) p[i] = static_cast<char>(i % 251);
    munmap(p, size);
    close(fd);
  }
  ~Object() { shm_unlink(key_.c_str()); }
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

TEST(SharedMemoryRegionTest, MapsAnyOffsetAndRefusesWhatIsOutsideTheObject) {
  Object object(3 * 4096);
  auto region = SharedMemoryRegion::Map("r", object.key(), 4096 + 10, 100);
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  EXPECT_EQ(static_cast<unsigned char>((*region)->data()[0]), (4096 + 10) % 251);
  EXPECT_EQ((*region)->byte_size(), 100u);

  auto past = SharedMemoryRegion::Map("r", object.key(), 3 * 4096 - 10, 11);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("past the object's end"), std::string::npos);
  EXPECT_FALSE(SharedMemoryRegion::Map("r", object.key(), 0, 0).ok());  // empty
  for (const char* key : {"", "/", "x", "/a/b", "/..", "/."}) {
    auto bad = SharedMemoryRegion::Map("r", key, 0, 16);
    ASSERT_FALSE(bad.ok()) << key;
    EXPECT_NE(bad.status().message().find("POSIX shared-memory name"), std::string::npos) << key;
  }
  // shm_open would open the object named before the NUL: a key must not say one name and
  // open another (the json_bodies fuzzer found such keys registered).
  auto nul = SharedMemoryRegion::Map("r", object.key() + std::string("\0x", 2), 0, 16);
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.status().message().find("POSIX shared-memory name"), std::string::npos);
  auto missing = SharedMemoryRegion::Map("r", "/manypy_unit_missing", 0, 16);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
}

TEST(SharedMemoryRegionTest, UnregisteringKeepsTheMappingForThoseHoldingIt) {
  Object object(4096);
  SharedMemoryRegions regions;
  ASSERT_TRUE(regions.Register("r", object.key(), 0, 4096).ok());
  EXPECT_EQ(regions.Register("r", object.key(), 0, 16).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(regions.Register("", object.key(), 0, 16).code(), StatusCode::kInvalidArgument);
  std::shared_ptr<const SharedMemoryRegion> held = regions.Find("r");
  ASSERT_NE(held, nullptr);
  regions.Unregister("r");
  EXPECT_EQ(regions.Find("r"), nullptr);
  EXPECT_EQ(regions.List("r").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(static_cast<unsigned char>(held->data()[300]), 300 % 251);  // still readable
  ASSERT_TRUE(regions.Register("r", object.key(), 0, 16).ok());           // the name is free again
  ASSERT_TRUE(regions.List("").ok());
  EXPECT_EQ(regions.List("")->size(), 1u);
}

TEST(SharedMemoryRefTest, ParametersResolveOrSayWhatIsWrong) {
  Object object(4096);
  SharedMemoryRegions regions;
  ASSERT_TRUE(regions.Register("r", object.key(), 0, 64).ok());
  WireParameters p;
  auto none = ResolveSharedMemory(p, &regions, "input 'x'");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  p["shared_memory_region"].set_string_param("r");
  auto no_size = ResolveSharedMemory(p, &regions, "input 'x'");
  ASSERT_FALSE(no_size.ok());
  EXPECT_NE(no_size.status().message().find("input 'x': shared memory needs both"), std::string::npos);

  p["shared_memory_byte_size"].set_int64_param(16);
  p["shared_memory_offset"].set_uint64_param(48);
  auto ok = ResolveSharedMemory(p, &regions, "input 'x'");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->offset, 48u);
  EXPECT_EQ(static_cast<unsigned char>((*ok)->data()[0]), 48);

  p["shared_memory_offset"].set_int64_param(49);
  EXPECT_NE(ResolveSharedMemory(p, &regions, "x").status().message().find("run past the end of region 'r' (64 bytes)"),
            std::string::npos);
  p["shared_memory_offset"].set_int64_param(-1);
  EXPECT_NE(ResolveSharedMemory(p, &regions, "x").status().message().find("non-negative integer"),
            std::string::npos);
  p["shared_memory_offset"].set_int64_param(0);
  p["shared_memory_region"].set_int64_param(3);
  EXPECT_NE(ResolveSharedMemory(p, &regions, "x").status().message().find("must be a string"),
            std::string::npos);
  p["shared_memory_region"].set_string_param("elsewhere");
  EXPECT_NE(ResolveSharedMemory(p, &regions, "x").status().message().find("named 'elsewhere'"),
            std::string::npos);
  // No registry: shared memory is not accepted at all.
  EXPECT_NE(ResolveSharedMemory(p, nullptr, "x").status().message().find("--allow-client-shm"),
            std::string::npos);
}

TEST(SharedMemoryViewsTest, AViewKeptPastTheRequestGetsItsOwnCopy) {
  std::vector<float> region = {1, 2, 3, 4};
  int released = 0;
  at::Tensor kept;
  {
    SharedMemoryViews views;
    at::Tensor view = at::from_blob(region.data(), {4}, [&released](void*) { ++released; },
                                    at::TensorOptions().dtype(at::kFloat));
    views.Add(view);
    kept = view.view({2, 2});  // another tensor on the same storage, as a model's
    view = at::Tensor();
    EXPECT_EQ(views.Release(), 1u);
  }
  EXPECT_EQ(released, 1);  // the region's deleter ran: nothing points into it
  region[0] = 9;           // the client rewrites its region
  EXPECT_EQ(kept.flatten()[0].item<float>(), 1);
  EXPECT_EQ(kept.sum().item<float>(), 10);

  // A view nobody kept is released without a copy.
  SharedMemoryViews views;
  views.Add(at::from_blob(region.data(), {4}, [&released](void*) { ++released; },
                          at::TensorOptions().dtype(at::kFloat)));
  EXPECT_EQ(views.Release(), 0u);
  EXPECT_EQ(released, 2);
}

}  // namespace
}  // namespace manypy

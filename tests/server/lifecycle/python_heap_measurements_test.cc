// PythonHeapMeasurements: one measurement per archive file, a changed file
// measured again, and the table bounded.
#include "server/lifecycle/python_heap_measurements.h"

#include <gtest/gtest.h>

namespace manypy {
namespace {

struct stat File(ino_t inode, off_t size, time_t mtime) {
  struct stat s {};
  s.st_dev = 1;
  s.st_ino = inode;
  s.st_size = size;
  s.st_mtim.tv_sec = mtime;
  return s;
}

TEST(PythonHeapMeasurementsTest, AFileIsMeasuredOnceAndAChangedFileAgain) {
  PythonHeapMeasurements table;
  const std::string key = PythonHeapMeasurements::Key("/models/a.mpk", File(7, 100, 5));
  EXPECT_FALSE(table.Find(key).has_value());
  table.Record(key, 4096);
  EXPECT_EQ(table.Find(key).value_or(-1), 4096);
  // Rewritten in place (size, time) or replaced (inode): another key.
  EXPECT_FALSE(table.Find(PythonHeapMeasurements::Key("/models/a.mpk", File(7, 101, 5))).has_value());
  EXPECT_FALSE(table.Find(PythonHeapMeasurements::Key("/models/a.mpk", File(7, 100, 6))).has_value());
  EXPECT_FALSE(table.Find(PythonHeapMeasurements::Key("/models/a.mpk", File(8, 100, 5))).has_value());
  EXPECT_FALSE(table.Find(PythonHeapMeasurements::Key("/models/b.mpk", File(7, 100, 5))).has_value());
}

TEST(PythonHeapMeasurementsTest, PastItsCapacityTheOldestGoes) {
  PythonHeapMeasurements table(2);
  auto key = [](int i) { return PythonHeapMeasurements::Key("/m/" + std::to_string(i), File(i, 1, 1)); };
  table.Record(key(1), 1);
  table.Record(key(2), 2);
  table.Record(key(3), 3);
  EXPECT_FALSE(table.Find(key(1)).has_value());
  EXPECT_EQ(table.Find(key(2)).value_or(-1), 2);
  EXPECT_EQ(table.Find(key(3)).value_or(-1), 3);
}

}  // namespace
}  // namespace manypy

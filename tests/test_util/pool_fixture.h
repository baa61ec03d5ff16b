// Shared test helpers for pool tests: a pool with the test cache directory
// and the test-only extension modules on sys.path. Not thread-safe to set up.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "interpreters/pool.h"

namespace manypy::testing {

/// Options for a pool of `n` interpreters used by the tests.
inline PoolOptions TestPoolOptions(size_t n) {
  PoolOptions options;
  options.interpreters = n;
  options.extra_sys_path = {MANYPY_TEST_PYTHON_DIR};
  return options;
}

/// What `work` raised, as the status-returning boundary (RunPython) hands it
/// over; fails the current test when `work` raised nothing.
template <typename Work>
PythonError RaisedBy(Work&& work) {
  PythonError raised("", "", "");
  Status status = RunPython(work, [&](const PythonError& e) {
    raised = e;
    return Internal(e.what());
  });
  EXPECT_FALSE(status.ok()) << "expected PythonError";
  return raised;
}

/// Creates a pool or fails the current test with the status.
inline std::unique_ptr<InterpreterPool> MakePool(size_t n) {
  auto pool = InterpreterPool::Create(TestPoolOptions(n));
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (!pool.ok()) return nullptr;
  return std::move(*pool);
}

}  // namespace manypy::testing

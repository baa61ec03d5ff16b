// Errors are part of the interface: every failure is a PythonError or a
// Status that names what went wrong, and the interpreter keeps working.
#include <gtest/gtest.h>

#include "interpreters/pool.h"
#include "interpreters/python_error.h"
#include "tests/test_util/pool_fixture.h"

namespace manypy {
namespace {

using testing::MakePool;
using testing::RaisedBy;
using testing::TestPoolOptions;

TEST(PoolErrorsTest, PythonExceptionCarriesTypeMessageAndTraceback) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  s.Exec("def fail(n):\n    raise ValueError(f'bad value {n}')\n");
  {
    PythonError e = RaisedBy([&] { s.Global("__main__", "fail").Call({Value(3)}); });
    EXPECT_EQ(e.type(), "ValueError");
    EXPECT_EQ(e.message(), "bad value 3");
    EXPECT_STREQ(e.what(), "ValueError: bad value 3");
    EXPECT_NE(e.traceback().find("in fail"), std::string::npos) << e.traceback();
    EXPECT_NE(e.traceback().find("Traceback (most recent call last)"), std::string::npos);
  }
  // The interpreter is still usable.
  EXPECT_EQ(s.Eval("1 + 1").ToValue().to_int(), 2);
}

TEST(PoolErrorsTest, CustomExceptionTypeIsQualified) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  PythonError e = RaisedBy(
      [&] { s.Exec("class ModelError(RuntimeError): pass\nraise ModelError('broken weights')"); });
  EXPECT_EQ(e.type(), "__main__.ModelError");
  EXPECT_EQ(e.message(), "broken weights");
}

TEST(PoolErrorsTest, SystemExitDoesNotExitTheProcess) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  EXPECT_TRUE(RaisedBy([&] { s.Exec("import sys\nsys.exit(3)"); }).from_python());
  EXPECT_TRUE(RaisedBy([&] { s.Exec("raise KeyboardInterrupt"); }).from_python());
  EXPECT_EQ(s.Eval("'still alive'").ToValue().to_str(), "still alive");
}

TEST(PoolErrorsTest, MissingAttributeAndModule) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  {
    PythonError e = RaisedBy([&] { s.Global("math", "no_such_function"); });
    EXPECT_EQ(e.type(), "AttributeError");
    EXPECT_NE(e.message().find("no_such_function"), std::string::npos);
  }
  {
    PythonError e = RaisedBy([&] { s.Import("manypy_no_such_module"); });
    EXPECT_EQ(e.type(), "ModuleNotFoundError");
    EXPECT_NE(e.message().find("manypy_no_such_module"), std::string::npos);
  }
  EXPECT_FALSE(s.Import("math").HasAttr("no_such_function"));
}

TEST(PoolErrorsTest, SyntaxErrorInSource) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  PythonError e = RaisedBy([&] { s.Exec("def broken(:\n"); });
  EXPECT_EQ(e.type(), "SyntaxError");
}

TEST(PoolErrorsTest, UnconvertibleResultIsATypeError) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  {
    PythonError e = RaisedBy([&] { s.Eval("object()").ToValue(); });
    EXPECT_EQ(e.type(), "TypeError");
    EXPECT_NE(e.message().find("'object'"), std::string::npos);
  }
  {
    PythonError e = RaisedBy([&] { s.Eval("2 ** 70").ToValue(); });
    EXPECT_NE(e.message().find("64 bits"), std::string::npos);
  }
}

TEST(PoolErrorsTest, BadCacheDirectoryIsReported) {
  auto options = TestPoolOptions(1);
  options.cache_dir = "/proc/self/manypy-cache";
  auto pool = InterpreterPool::Create(options);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(pool.status().message().find("/proc/self/manypy-cache"), std::string::npos);
}

TEST(PoolErrorsTest, MissingLibpythonIsReported) {
  auto options = TestPoolOptions(1);
  options.libpython = "/opt/nowhere/libpython3.11.so.1.0";
  auto pool = InterpreterPool::Create(options);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kNotFound);
  EXPECT_NE(pool.status().message().find("/opt/nowhere/libpython3.11.so.1.0"), std::string::npos);
}

TEST(PoolErrorsTest, MissingShimIsReported) {
  auto options = TestPoolOptions(1);
  options.shim_library = "/opt/nowhere/libmanypy_shim.so";
  auto pool = InterpreterPool::Create(options);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("/opt/nowhere/libmanypy_shim.so"), std::string::npos);
}

TEST(PoolErrorsTest, FailingPreloadNamesTheModuleAndInterpreter) {
  auto options = TestPoolOptions(1);
  options.preload_modules = {"torch", "manypy_missing_preload"};
  auto pool = InterpreterPool::Create(options);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("manypy_missing_preload"), std::string::npos);
  EXPECT_NE(pool.status().message().find("interpreter 0"), std::string::npos);
}

TEST(PoolErrorsTest, OutOfRangeInterpreterIndex) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  EXPECT_THROW(pool->AcquireAt(5), std::out_of_range);
}

}  // namespace
}  // namespace manypy

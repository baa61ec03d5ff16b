// CheckTorchVersion: the PyTorch releases the pool refuses, and why.
#include "interpreters/torch_version.h"

#include <gtest/gtest.h>

#include "interpreters/pool.h"
#include "interpreters/python_error.h"
#include "interpreters/torch_hooks.h"

namespace manypy {
namespace {

TEST(TorchVersionTest, ParsesMajorAndMinor) {
  EXPECT_EQ(TorchVersion::Parse("2.6.0+debian").major, 2);
  EXPECT_EQ(TorchVersion::Parse("2.6.0+debian").minor, 6);
  EXPECT_EQ(TorchVersion::Parse("1.13.0a0").minor, 13);
  EXPECT_EQ(TorchVersion::Parse("nightly").major, -1);
}

TEST(TorchVersionTest, AcceptsTheReleasesWithPerInterpreterTags) {
  EXPECT_TRUE(CheckTorchVersion("1.13.0a0", "1.13.0").ok());
  EXPECT_TRUE(CheckTorchVersion("2.6.0+debian", "2.6.0").ok());
  EXPECT_TRUE(CheckTorchVersion("2.8.1", "2.8.0").ok());
}

// From 2.9 on (Debian 14's 2.14) the pool routes libtorch's one global Python
// interpreter itself (global_py_interpreter.h), built only against such a
// libtorch: a build against an older one refuses them, naming why.
TEST(TorchVersionTest, AcceptsTwoNineAndLaterOnlyWhenBuiltAgainstThem) {
  for (const char* v : {"2.9.0", "2.10.1+cpu", "2.14.1+debian"}) {
    EXPECT_TRUE(CheckTorchVersion(v, v).ok()) << v << ": " << CheckTorchVersion(v, v).ToString();
    for (const char* built : {"1.13.0", "2.6.0", "2.8.0"}) {
      Status s = CheckTorchVersion(v, built);
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << v;
      EXPECT_NE(s.message().find(std::string("PyTorch ") + v + " is not supported by this build"),
                std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("getGlobalPyInterpreter"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(std::string("(this one: ") + built + ")"), std::string::npos)
          << s.message();
    }
  }
  EXPECT_FALSE(CheckTorchVersion("2.14.1", "2.10.0").ok());  // built against another 2.x
  EXPECT_FALSE(CheckTorchVersion("1.8.1", "1.8.1").ok());
  EXPECT_FALSE(CheckTorchVersion("unknown", "2.6.0").ok());
}

// The releases the suite runs on, as CMakeLists.txt's MANYPY_TESTED_TORCH
// names them; any other (built with MANYPY_ALLOW_UNTESTED_TORCH=ON) warns.
TEST(TorchVersionTest, KnowsTheTestedReleases) {
  EXPECT_STREQ(TestedTorchVersions(), "1.13, 2.6, 2.14");
  for (const char* v : {"1.13.0a0", "1.13.1", "2.6.0+debian", "2.14.1"}) {
    EXPECT_TRUE(IsTestedTorch(v, TestedTorchVersions())) << v;
  }
  for (const char* v : {"1.12.1", "2.1.0", "2.8.0", "2.1", "2.140.0", "nightly"}) {
    EXPECT_FALSE(IsTestedTorch(v, TestedTorchVersions())) << v;
  }
}

TEST(TorchVersionTest, RefusesATorchOtherThanTheOneBuiltAgainst) {
  Status s = CheckTorchVersion("2.6.0+debian", "1.13.0");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("import PyTorch 2.6.0+debian but manypy was built against libtorch 1.13.0"),
            std::string::npos)
      << s.message();
}

TEST(TorchVersionTest, ThePoolRecordsTheTorchItsInterpretersImport) {
  PoolOptions options;
  options.interpreters = 1;
  options.cache_dir = MANYPY_TEST_CACHE_DIR;
  options.shim_library = MANYPY_TEST_SHIM_LIBRARY;
  auto pool = InterpreterPool::Create(options);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto s = (*pool)->AcquireAt(0);
  EXPECT_EQ(RunningTorchVersion(), s.Eval("__import__('torch').__version__").ToValue().to_str());
  EXPECT_EQ(TorchVersion::Parse(RunningTorchVersion()).minor,
            TorchVersion::Parse(BuiltTorchVersion()).minor);
}

// PyTorch 2.x: a second interpreter's copy of libtorch_python re-runs static
// registrations (inductor::resize_storage_bytes_, the dump_traceback handler)
// that would throw inside dlopen and end the process; torch_hooks.cc skips them.
TEST(TorchVersionTest, ASecondLibtorchPythonCopyRegistersNothingTwice) {
  ASSERT_TRUE(CheckTorchHooksActive().ok()) << CheckTorchHooksActive().ToString();
  PoolOptions options;
  options.interpreters = 2;
  options.cache_dir = MANYPY_TEST_CACHE_DIR;
  options.shim_library = MANYPY_TEST_SHIM_LIBRARY;
  auto pool = InterpreterPool::Create(options);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  TorchHookCounts counts = TorchHooks();
  if (TorchVersion::Parse(BuiltTorchVersion()).major < 2) {
    EXPECT_EQ(counts.skipped_definitions, 0);  // 1.13 has no such registrations
    EXPECT_EQ(counts.skipped_handlers, 0);
  } else {
    EXPECT_GE(counts.skipped_definitions, 1);
    EXPECT_GE(counts.skipped_handlers, 1);
  }
  auto s = (*pool)->AcquireAt(1);
  EXPECT_EQ(s.Eval("float((__import__('torch').ones(3) * 2).sum())").ToValue().to_double(), 6.0);
}

}  // namespace
}  // namespace manypy

// A model's Python exception as the status its load or call answers: what the
// server's Python lacks is a precondition, anything else is the model's fault,
// named with its type, message and the archive's own frame.
#include "server/lifecycle/model_python_errors.h"

#include <gtest/gtest.h>

namespace manypy {
namespace {

// A packaged model's forward raising in a helper module, as Python prints it.
const char* const kTraceback =
    "Traceback (most recent call last):\n"
    "  File \"<torch_package_0>.net.py\", line 7, in forward\n"
    "    return helper_mod.scale(x)\n"
    "  File \"<torch_package_0>.helper_mod.py\", line 5, in scale\n"
    "    raise ValueError(\"bad input\")\n"
    "ValueError: bad input\n";

TEST(ModelPythonErrorsTest, WhatTheServersPythonLacksIsAPreconditionWithTheRuntimesMessageAlone) {
  for (const char* type : {"manypy_model_runtime.MissingModulesError",
                           "manypy_model_runtime.CompileToolchainError"}) {
    Status s = LoadRaised("/repo/m.mpk", PythonError(type, "install python3-scipy", kTraceback));
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << type;
    EXPECT_EQ(s.message(), "loading /repo/m.mpk failed: install python3-scipy") << type;
  }
}

TEST(ModelPythonErrorsTest, AnyOtherLoadFailureIsInternalNamingTheExceptionAndTheArchivesFrame) {
  Status s = LoadRaised("/repo/m.mpk", PythonError("ValueError", "bad input", kTraceback));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message().rfind("loading /repo/m.mpk failed: ValueError: bad input at helper_mod.py:5",
                              0),
            0u)
      << s.message();
}

TEST(ModelPythonErrorsTest, ACallsExceptionNamesTheModelAndGivesItsType) {
  std::string error_type;
  Status s = ModelRaised("scorer", PythonError("ValueError", "bad input", kTraceback), &error_type);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message().rfind("model 'scorer' raised ValueError: bad input at helper_mod.py:5", 0),
            0u)
      << s.message();
  EXPECT_EQ(error_type, "ValueError");
}

TEST(ModelPythonErrorsTest, SysExitInAModelSaysTheServerServesOn) {
  std::string error_type;
  Status s = ModelRaised("scorer", PythonError("SystemExit", "3", ""), &error_type);
  EXPECT_EQ(s.message(),
            "model 'scorer' raised SystemExit: 3 (the model called sys.exit; the server and this "
            "interpreter serve on)");
  EXPECT_EQ(error_type, "SystemExit");
}

TEST(ModelPythonErrorsTest, AHostSideFailureSaysFailedAndGivesNoType) {
  std::string error_type = "unchanged";
  Status s = ModelRaised("scorer", PythonError::Host("expected a list"), &error_type);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "model 'scorer' failed: expected a list");
  EXPECT_EQ(error_type, "unchanged");
}

}  // namespace
}  // namespace manypy

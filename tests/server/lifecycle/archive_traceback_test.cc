// The archive's own frames found in Python tracebacks as CPython 3.11 and
// 3.13 print them (with and without caret lines), named as files inside the
// archive, innermost first, and the bounded message made of them.
#include "server/lifecycle/archive_traceback.h"

#include <gtest/gtest.h>

namespace manypy {
namespace {

// As a packaged model's forward raising two calls deep in a helper module
// prints it on Python 3.11 (carets under each source line).
const char* const kTraceback =
    "Traceback (most recent call last):\n"
    "  File \"<string>\", line 1, in <module>\n"
    "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/module.py\", line 1194, in _call_impl\n"
    "    return forward_call(*input, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"<torch_package_0>.net.py\", line 7, in forward\n"
    "    return helper_mod.scale(x)\n"
    "           ^^^^^^^^^^^^^^^^^^^\n"
    "  File \"<torch_package_0>.tools.helper_mod.py\", line 2, in scale\n"
    "    return deep(x)\n"
    "           ^^^^^^^\n"
    "  File \"<torch_package_0>.tools.helper_mod.py\", line 5, in deep\n"
    "    raise ValueError(f\"bad input {x.shape}\")\n"
    "ValueError: bad input torch.Size([1])\n";

TEST(ArchiveTracebackTest, FindsTheArchivesFramesInnermostFirstAsFilesInsideIt) {
  std::vector<ArchiveFrame> frames = ArchiveFrames(kTraceback);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].file, "tools/helper_mod.py");
  EXPECT_EQ(frames[0].line, 5);
  EXPECT_EQ(frames[0].function, "deep");
  EXPECT_EQ(frames[0].source, "raise ValueError(f\"bad input {x.shape}\")");
  EXPECT_EQ(frames[1].function, "scale");
  EXPECT_EQ(frames[1].source, "return deep(x)");  // not the caret line under it
  EXPECT_EQ(frames[2].file, "net.py");
  EXPECT_EQ(frames[2].line, 7);
}

TEST(ArchiveTracebackTest, DescribesTheInnermostFrameWithItsSourceAndItsCallers) {
  EXPECT_EQ(DescribeArchiveFrames(kTraceback),
            " at tools/helper_mod.py:5 in deep: raise ValueError(f\"bad input {x.shape}\") "
            "(called from tools/helper_mod.py:2 in scale; net.py:7 in forward)");
}

TEST(ArchiveTracebackTest, WithoutCaretLinesAndAtModuleLevel) {
  // Python 3.13 leaves the carets out where they would underline the whole line.
  const char* tb =
      "Traceback (most recent call last):\n"
      "  File \"<torch_package_2>.pkg.__init__.py\", line 3, in <module>\n"
      "    CONFIG = load_config()\n"
      "NameError: name 'load_config' is not defined\n";
  EXPECT_EQ(DescribeArchiveFrames(tb), " at pkg/__init__.py:3 in <module>: CONFIG = load_config()");
}

TEST(ArchiveTracebackTest, NothingWhenNoFrameIsTheArchivesAndBoundedWhenLong) {
  EXPECT_EQ(DescribeArchiveFrames("Traceback (most recent call last):\n"
                                  "  File \"/usr/lib/python3/dist-packages/torch/x.py\", line 9, in f\n"
                                  "    boom()\nRuntimeError: boom\n"),
            "");
  EXPECT_EQ(DescribeArchiveFrames(""), "");
  std::string tb = "Traceback (most recent call last):\n  File \"<torch_package_0>.m.py\", line 1, in f\n    " +
                   std::string(5000, 'x') + "\nValueError: long\n";
  std::string d = DescribeArchiveFrames(tb, 100);
  EXPECT_EQ(d.size(), 100u);
  EXPECT_EQ(d.substr(97), "...");
}

}  // namespace
}  // namespace manypy

// EnablePythonStackDumps: has every interpreter's faulthandler dump its
// threads' Python stacks into a file of its own when a fatal signal comes, for
// the crash report to copy. Call once from main's thread, after
// InstallCrashHandler and before any model loads.
#pragma once

#include "common/status.h"
#include "interpreters/pool.h"

namespace manypy {

/// faulthandler.enable(file=FD, all_threads=True) in each interpreter of
/// `pool`, FD a memfd handed to AddPythonStackFile. Each interpreter's
/// libpython copy has its own faulthandler, which dumps that interpreter's
/// threads and then calls the handler installed before it: they chain down to
/// the crash handler. INTERNAL naming the interpreter when one refuses.
Status EnablePythonStackDumps(InterpreterPool* pool);

}  // namespace manypy

// CrashHandler: on SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT writes a crash
// report (the call that crashed, every running call, the native stack, every
// interpreter's Python stacks; text or one JSON object) to stderr with write(2)
// only, records the crash for quarantine, then dies by the same signal.
// Install once from main's thread; the handler itself is async-signal-safe.
#pragma once

#include <cstddef>
#include <string>

namespace manypy {

struct CrashHandlerOptions {
  bool json = false;        ///< --log-format=json: the report is one JSON object
  std::string state_dir;    ///< the crash is appended to STATE_DIR/crashes; empty: not recorded
};

/// Installs the handler for the five fatal signals. Handlers installed later
/// (each interpreter's faulthandler) run first and chain to it.
void InstallCrashHandler(const CrashHandlerOptions& options);

/// Puts a recorder of where a fault happened in front of every handler of
/// SIGSEGV, SIGBUS, SIGFPE and SIGILL installed so far: the interpreters'
/// faulthandlers dump the Python stacks, then re-raise the signal, which hides
/// its address from the report (a stack overflow is told by it). Call once,
/// after the last faulthandler is enabled.
void RecordFaultSitesFirst();

/// Adds a file (a memfd) into which interpreter `interpreter`'s faulthandler
/// dumps its threads' Python stacks when a fatal signal arrives (it runs
/// before this handler, which copies the file into the report). At most 256.
void AddPythonStackFile(size_t interpreter, int fd);

}  // namespace manypy

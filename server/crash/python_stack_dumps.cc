#include "server/crash/python_stack_dumps.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "server/crash/crash_handler.h"

namespace manypy {

// faulthandler, not a walk of each thread state's frames from C: the CPython
// functions that walk them (_Py_DumpTracebackThreads) are exported by
// Debian 12's libpython3.11 but not by Debian 13's libpython3.13, while
// faulthandler.enable is public on both and does exactly that walk from its
// signal handler, async-signal-safe.
Status EnablePythonStackDumps(InterpreterPool* pool) {
  for (size_t i = 0; i < pool->size(); ++i) {
    const std::string name = "manypy-python-stacks-" + std::to_string(i);
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) return Internal("cannot create the Python stack file of interpreter " +
                                std::to_string(i) + ": " + strerror(errno));
    Status enabled = pool->RunAt(i, [fd](InterpreterSession& session) {
      session.Exec("import faulthandler\nfaulthandler.enable(file=" + std::to_string(fd) +
                   ", all_threads=True)\n");
    });
    if (!enabled.ok()) {
      close(fd);
      return Internal("interpreter " + std::to_string(i) + ": faulthandler.enable: " +
                      enabled.message());
    }
    AddPythonStackFile(i, fd);
  }
  RecordFaultSitesFirst();
  return Status::Ok();
}

}  // namespace manypy

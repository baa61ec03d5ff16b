// The handler uses only async-signal-safe calls (write, read, lseek, open,
// clock_gettime, sigaction, raise, getpid, prctl) and memory prepared at install:
// a crash can come while the crashing thread holds malloc's or a logger's lock.
#include "server/crash/crash_handler.h"

#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "server/crash/crash_record.h"
#include "server/crash/crash_site.h"
#include "server/crash/running_calls.h"
#include "server/crash/signal_stack.h"

namespace manypy {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr size_t kMaxPythonStackFiles = 256;
constexpr int kMaxFrames = 64;

bool g_json = false;
char g_crashes_path[4096] = {};  // empty: crashes are not recorded
int g_native_stack_fd = -1;      // a memfd backtrace_symbols_fd writes into
struct PythonStackFile {
  size_t interpreter;
  int fd;
};
PythonStackFile g_python_stack_files[kMaxPythonStackFiles];
std::atomic<size_t> g_python_stack_file_count{0};
std::atomic<bool> g_crashing{false};

// A running call as the handler copied it.
struct CallCopy {
  bool busy = false;
  int64_t version = 0;
  uint32_t requests = 0;
  char model[RunningCall::kNameBytes];
  char request_id[RunningCall::kIdBytes];
};
// Static, not on the stack: the handler may run on a small alternate stack
// (faulthandler's), and runs once (g_crashing).
// One more entry than the slots: the load blamed when no call is (kLoadEntry).
constexpr size_t kLoadEntry = kMaxRunningCallSlots;
CallCopy g_calls[kMaxRunningCallSlots + 1];
bool g_running[kMaxRunningCallSlots];

/// Appends to a fixed buffer and writes it to stderr when full or flushed.
class Out {
 public:
  ~Out() { Flush(); }
  void Text(const char* s) { Bytes(s, strlen(s)); }
  void Bytes(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) Char(s[i]);
  }
  void Char(char c) {
    if (used_ == sizeof(buffer_)) Flush();
    buffer_[used_++] = c;
  }
  void Int(int64_t value) {
    char digits[24];
    const size_t n = PutDecimal(digits, sizeof(digits), 0, value);
    for (size_t i = 0; i < n; ++i) Char(digits[i]);
  }
  void Padded(int64_t value, int width) {
    char digits[8];
    for (int i = width - 1; i >= 0; --i, value /= 10) digits[i] = static_cast<char>('0' + value % 10);
    Bytes(digits, static_cast<size_t>(width));
  }
  /// `s` inside a JSON string (without its quotes); in text, as it is.
  void Escaped(const char* s, size_t n) {
    if (!g_json) return Bytes(s, n);
    static const char kHex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; ++i) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"' || c == '\\') {
        Char('\\');
        Char(static_cast<char>(c));
      } else if (c == '\n') {
        Text("\\n");
      } else if (c < 0x20 || c >= 0x7f) {  // bytes, not UTF-8 sequences: keep the line valid JSON
        Text("\\u00");
        Char(kHex[c >> 4]);
        Char(kHex[c & 15]);
      } else {
        Char(static_cast<char>(c));
      }
    }
  }
  void Escaped(const char* s) { Escaped(s, strlen(s)); }
  /// The whole of file `fd`, escaped (a memfd written by a dumper).
  void File(int fd) {
    if (lseek(fd, 0, SEEK_SET) != 0) return;
    char chunk[1024];
    for (ssize_t n; (n = read(fd, chunk, sizeof(chunk))) > 0;) Escaped(chunk, static_cast<size_t>(n));
  }
  void Flush() {
    size_t done = 0;
    while (done < used_) {
      ssize_t n = write(STDERR_FILENO, buffer_ + done, used_ - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    used_ = 0;
  }

 private:
  char buffer_[4096];
  size_t used_ = 0;
};

// RFC 3339 UTC from the epoch (gmtime is not async-signal-safe): Howard Hinnant's civil_from_days.
void Timestamp(Out& out, const timespec& now) {
  int64_t days = now.tv_sec / 86400, seconds = now.tv_sec % 86400;
  days += 719468;
  const int64_t era = days / 146097, doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  const int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = yoe + era * 400 + (month <= 2);
  out.Padded(year, 4); out.Char('-'); out.Padded(month, 2); out.Char('-'); out.Padded(day, 2);
  out.Char('T'); out.Padded(seconds / 3600, 2); out.Char(':'); out.Padded(seconds / 60 % 60, 2);
  out.Char(':'); out.Padded(seconds % 60, 2); out.Char('.'); out.Padded(now.tv_nsec / 1000000, 3);
  out.Char('Z');
}

// Where the crash happened, from the signal's own information.
struct CrashSite {
  bool stack_overflow = false;
  char thread[16] = {};  // the thread's name (Linux keeps 15 characters)
};

// The first fault's site as RecordFaultSite saw it, before the handlers it
// chains to (faulthandler's, which re-raise the signal) hid its address.
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_before_recorder[sizeof(kFaultSignals) / sizeof(int)];
std::atomic<bool> g_fault_recorded{false};
bool g_fault_was_overflow = false;

CrashSite SiteOf(int signal, const siginfo_t* info, const void* context) {
  CrashSite site;
  site.stack_overflow = g_fault_recorded.load(std::memory_order_acquire)
                            ? g_fault_was_overflow
                            : IsStackOverflow(signal, info, context);
  prctl(PR_GET_NAME, site.thread, 0, 0, 0);
  site.thread[sizeof(site.thread) - 1] = '\0';
  return site;
}

/// A consistent copy of a running call, or false when it was being rewritten.
bool ReadCall(const RunningCall& e, CallCopy* copy) {
  uint32_t before = e.generation.load(std::memory_order_acquire);
  if (before % 2 != 0) return false;
  copy->busy = e.busy;
  copy->version = e.version;
  copy->requests = e.requests;
  memcpy(copy->model, e.model, sizeof(copy->model));
  memcpy(copy->request_id, e.request_id, sizeof(copy->request_id));
  copy->model[sizeof(copy->model) - 1] = copy->request_id[sizeof(copy->request_id) - 1] = '\0';
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.generation.load(std::memory_order_relaxed) == before;
}

/// A consistent copy of a load in progress into `copy`, or false.
bool ReadLoad(const LoadingModel& e, CallCopy* copy) {
  uint32_t before = e.generation.load(std::memory_order_acquire);
  if (before % 2 != 0 || !e.claimed.load(std::memory_order_acquire)) return false;
  copy->busy = true;
  copy->version = e.version;
  copy->requests = 0;
  memcpy(copy->model, e.model, sizeof(copy->model));
  copy->model[sizeof(copy->model) - 1] = '\0';
  copy->request_id[0] = '\0';
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.generation.load(std::memory_order_relaxed) == before;
}

// "interpreter N running model NAME version V, request "ID"" (text) or its
// JSON fields; for kLoadEntry, the load of that model.
void DescribeCall(Out& out, size_t slot, const CallCopy& c) {
  if (slot == kLoadEntry) {
    if (g_json) {
      out.Text("\"loading\": true, \"model\": \""); out.Escaped(c.model);
      out.Text("\", \"version\": "); out.Int(c.version);
    } else {
      out.Text("the load of model "); out.Text(c.model);
      out.Text(" version "); out.Int(c.version);
    }
    return;
  }
  if (g_json) {
    out.Text("\"interpreter\": "); out.Int(static_cast<int64_t>(slot));
    out.Text(", \"model\": \""); out.Escaped(c.model);
    out.Text("\", \"version\": "); out.Int(c.version);
    out.Text(", \"request_id\": \""); out.Escaped(c.request_id);
    out.Text("\", \"requests\": "); out.Int(c.requests);
    return;
  }
  out.Text("interpreter "); out.Int(static_cast<int64_t>(slot));
  out.Text(" running model "); out.Text(c.model);
  out.Text(" version "); out.Int(c.version);
  out.Text(", request id \""); out.Text(c.request_id);
  out.Text("\"");
  if (c.requests > 1) {
    out.Text(" (and "); out.Int(c.requests - 1); out.Text(" more batched with it)");
  }
}

void RecordCrash(const timespec& now, int signal, const CallCopy& blamed) {
  if (g_crashes_path[0] == '\0') return;
  char line[512];
  size_t n = FormatCrashLine(line, sizeof(line), now.tv_sec, SignalName(signal), blamed.model,
                             blamed.version);
  int fd = open(g_crashes_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  // One write of a short line to an O_APPEND file: never interleaved with another's.
  ssize_t ignored = write(fd, line, n);
  (void)ignored;
  close(fd);
}

void Report(int signal, const CrashSite& site) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  // The call that crashed: the crashing thread's; else, if only one call runs, that one.
  CallCopy* calls = g_calls;
  bool* running = g_running;
  size_t busy = 0, only = 0;
  for (size_t i = 0; i < kMaxRunningCallSlots; ++i) {
    running[i] = ReadCall(*RunningCallAt(i), &calls[i]) && calls[i].busy;
    if (running[i]) ++busy, only = i;
  }
  const int current = CurrentRunningCallSlot();
  int blamed = current >= 0 && running[current] ? current : (busy == 1 ? static_cast<int>(only) : -1);
  bool on_this_thread = blamed >= 0 && blamed == current;
  if (blamed < 0) {
    // No call: a load (unpickling, warm-up), this thread's or the only one.
    size_t loads = 0, only_load = 0;
    for (size_t i = 0; i < kMaxLoadingModels; ++i) {
      if (LoadingModelAt(i)->claimed.load(std::memory_order_acquire)) ++loads, only_load = i;
    }
    const int load = CurrentLoadingModel() >= 0 ? CurrentLoadingModel()
                     : loads == 1 && busy == 0  ? static_cast<int>(only_load)
                                                : -1;
    if (load >= 0 && ReadLoad(*LoadingModelAt(static_cast<size_t>(load)), &calls[kLoadEntry])) {
      blamed = static_cast<int>(kLoadEntry);
      on_this_thread = load == CurrentLoadingModel();
    }
  }
  if (blamed >= 0) RecordCrash(now, signal, calls[blamed]);

  Out out;
  if (g_json) {
    out.Text("{\"ts\": \""); Timestamp(out, now);
    out.Text("\", \"level\": \"error\", \"msg\": \"crash: ");
    out.Text(SignalName(signal));
    if (site.stack_overflow) out.Text(" (stack overflow)");
    if (blamed >= 0) {
      out.Text(" in model "); out.Escaped(calls[blamed].model);
      out.Text(" version "); out.Int(calls[blamed].version);
    }
    out.Text("\", \"signal\": \""); out.Text(SignalName(signal));
    out.Text("\", \"pid\": "); out.Int(getpid());
    out.Text(", \"stack_overflow\": "); out.Text(site.stack_overflow ? "true" : "false");
    out.Text(", \"thread\": \""); out.Escaped(site.thread);
    out.Text("\", \"frontend_thread\": "); out.Text(IsFrontendThread(site.thread) ? "true" : "false");
    out.Text(", \"crashed_thread_call\": ");
    if (on_this_thread) {
      out.Char('{'); DescribeCall(out, static_cast<size_t>(blamed), calls[blamed]); out.Char('}');
    } else {
      out.Text("null");
    }
    out.Text(", \"blamed\": ");
    if (blamed >= 0) {
      out.Char('{'); DescribeCall(out, static_cast<size_t>(blamed), calls[blamed]); out.Char('}');
    } else {
      out.Text("null");
    }
    out.Text(", \"running\": [");
    bool first = true;
    for (size_t i = 0; i < kMaxRunningCallSlots; ++i) {
      if (!running[i]) continue;
      if (!first) out.Text(", ");
      first = false;
      out.Char('{'); DescribeCall(out, i, calls[i]); out.Char('}');
    }
    out.Text("], \"native_stack\": \"");
  } else {
    out.Text("manypy-server: CRASH ");
    out.Text(SignalName(signal));
    if (site.stack_overflow) out.Text(" (stack overflow)");
    out.Text(" in process "); out.Int(getpid());
    if (blamed >= 0) {
      out.Text(on_this_thread ? ", on the thread of " : ", while only ");
      DescribeCall(out, static_cast<size_t>(blamed), calls[blamed]);
    } else {
      out.Text(", outside any model call");
    }
    if (!on_this_thread) {
      out.Text(", on thread '"); out.Text(site.thread); out.Char('\'');
      if (IsFrontendThread(site.thread)) out.Text(" (a frontend thread)");
    }
    out.Char('\n');
    for (size_t i = 0; i < kMaxRunningCallSlots; ++i) {
      if (!running[i] || static_cast<int>(i) == blamed) continue;
      out.Text("manypy-server: CRASH also running: "); DescribeCall(out, i, calls[i]); out.Char('\n');
    }
    out.Text("manypy-server: CRASH native stack:\n");
  }
  // The native stack, through a memfd (backtrace_symbols_fd writes without malloc).
  if (g_native_stack_fd >= 0) {
    void* frames[kMaxFrames];
    int n = backtrace(frames, kMaxFrames);
    if (ftruncate(g_native_stack_fd, 0) == 0 && lseek(g_native_stack_fd, 0, SEEK_SET) == 0) {
      backtrace_symbols_fd(frames, n, g_native_stack_fd);
      out.File(g_native_stack_fd);
    }
  }
  if (g_json) out.Text("\", \"python_stacks\": [");
  const size_t files = g_python_stack_file_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < files; ++i) {
    const PythonStackFile& f = g_python_stack_files[i];
    if (g_json) {
      out.Text(i ? ", {\"interpreter\": " : "{\"interpreter\": ");
      out.Int(static_cast<int64_t>(f.interpreter));
      out.Text(", \"stack\": \"");
      out.File(f.fd);
      out.Text("\"}");
    } else {
      out.Text("manypy-server: CRASH Python stacks of interpreter ");
      out.Int(static_cast<int64_t>(f.interpreter)); out.Text(":\n");
      out.File(f.fd);
    }
  }
  if (g_json) {
    out.Text("]}\n");
  } else {
    out.Text("manypy-server: CRASH the process ends by "); out.Text(SignalName(signal));
    out.Text(blamed >= 0 ? "; the crash is recorded against that model (quarantine)\n" : "\n");
  }
}

void OnFatalSignal(int signal, siginfo_t* info, void* context) {
  // One report: a second thread that crashes meanwhile waits for the first to end the process.
  if (g_crashing.exchange(true)) {
    for (;;) pause();
  }
  Report(signal, SiteOf(signal, info, context));
  // Dies by the same signal, with the default action (a core dump where the system keeps them).
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal, &default_action, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  raise(signal);
  _exit(128 + signal);  // not reached: the signal's default action ends the process
}

// Notes the first fault's site, then runs the handler it displaced as the
// kernel would have (faulthandler's dumps the Python stacks, then re-raises
// the signal for the report).
void RecordFaultSite(int signal, siginfo_t* info, void* context) {
  if (!g_fault_recorded.load(std::memory_order_relaxed)) {
    g_fault_was_overflow = IsStackOverflow(signal, info, context);
    g_fault_recorded.store(true, std::memory_order_release);
  }
  size_t i = 0;
  while (kFaultSignals[i] != signal) ++i;
  const struct sigaction& before = g_before_recorder[i];
  if (before.sa_flags & SA_SIGINFO) return before.sa_sigaction(signal, info, context);
  if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) return before.sa_handler(signal);
  OnFatalSignal(signal, info, context);
}

}  // namespace

void RecordFaultSitesFirst() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;  // a second time would chain to itself
  struct sigaction action {};
  action.sa_sigaction = RecordFaultSite;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_NODEFER | SA_ONSTACK | SA_SIGINFO;
  for (size_t i = 0; i < sizeof(kFaultSignals) / sizeof(int); ++i) {
    sigaction(kFaultSignals[i], &action, &g_before_recorder[i]);
  }
}

void InstallCrashHandler(const CrashHandlerOptions& options) {
  g_json = options.json;
  if (!options.state_dir.empty() &&
      options.state_dir.size() + 1 + strlen(kCrashesFileName) < sizeof(g_crashes_path)) {
    std::string path = options.state_dir + "/" + kCrashesFileName;
    memcpy(g_crashes_path, path.c_str(), path.size() + 1);
  }
  g_native_stack_fd = memfd_create("manypy-native-stack", MFD_CLOEXEC);
  // backtrace loads libgcc's unwinder on its first call (malloc, dlopen): now, not in the handler.
  void* warm[2];
  backtrace(warm, 2);
  // Main's alternate stack; every other thread gets its own as it starts (signal_stack.h).
  GiveThisThreadASignalStack();
  struct sigaction action {};
  action.sa_sigaction = OnFatalSignal;
  sigemptyset(&action.sa_mask);
  // NODEFER: the handler's own raise() of the default action is not held back.
  // ONSTACK: a stack overflow's handler runs on the thread's alternate stack.
  action.sa_flags = SA_NODEFER | SA_ONSTACK | SA_SIGINFO;
  for (int s : kFatalSignals) sigaction(s, &action, nullptr);
}

void AddPythonStackFile(size_t interpreter, int fd) {
  size_t at = g_python_stack_file_count.load(std::memory_order_relaxed);
  if (at >= kMaxPythonStackFiles) return;
  g_python_stack_files[at] = {interpreter, fd};
  g_python_stack_file_count.store(at + 1, std::memory_order_release);
}

}  // namespace manypy

// manypy-bench-memory: what serving one model costs in memory, N ways.
//
//   interpreters  one process, a pool of N interpreters, the model loaded in
//                 each (PythonModel: one shared mapping of the weights)
//   processes     N separate Python worker processes, each loading the model
//                 with torch.package (the TorchServe / Triton python-backend
//                 pattern: every worker holds its own copy of the weights)
//
// for N = 1, 2, 4. Every measurement runs in fresh processes, so nothing the
// benchmark itself allocated (or an earlier measurement left behind) is
// counted: the interpreters mode re-executes this program
// (`--child-interpreters N`), the processes mode starts N copies of
// tests/bench/memory_worker.py at once. Both run one inference before
// measuring, so lazily allocated state (kernels' scratch, Python caches) is
// counted, and both use one intra-op thread, so thread pools compare alike.
//
// rss_bytes is VmRSS after the inference: of the pool's process, or summed over
// the N workers (what a per-process memory limit or a node's accounting sees;
// it counts the pages of shared libraries in every worker, so the PSS sum is
// printed too, the fair lower bound). load_seconds: pool creation + model load
// / wall time from starting the N workers until the last has loaded.
//
// With --small-archive (a model that needs only torch, e.g. mlp_loop) that
// model is measured in the pool too, for N = 1, 2, 4 (target: <= 50 MiB RSS
// per extra interpreter). With --repository, manypy-server is started on that
// repository with N interpreters and timed until it reports every model ready.
//
// The measurements the targets compare (the pool at 1 and N interpreters
// against N processes; the small model at 1 and N; the server's time to ready
// at 2) run in kRounds rounds, in alternating order, each round in fresh
// processes; the others once. A round-measured record is the median round's,
// with every round's figure beside it.
//
// Writes a JSON list of {"model", "mode", "workers", "rss_bytes", "pss_bytes",
// "load_seconds"} records (interpreters records with N > 1 add
// "per_extra_interpreter_bytes" and "per_extra_interpreter_pss_bytes", 1 -> N;
// round-measured ones "rounds_rss_bytes"; --archive's add "weight_bytes"),
// --archive's model first, then the small model's, then {"model":
// "repository", "mode": "server", "workers", "ready_seconds", "models_ready"
// (, "rounds_ready_seconds")}; prints a table and where the pool's memory goes
// (stdout; progress on stderr). The targets' verdicts are not judged here but
// by tests/bench/bench_targets.py from the JSON (make bench-memory runs it).
//
// Usage: manypy-bench-memory --archive A.mpk --out PATH [--workers 1,2,4]
//                            [--python /usr/bin/python3] [--worker memory_worker.py]
//                            [--small-archive B.mpk] [--repository DIR] [--server BIN]
//                            [--eager-imports]   (pool children import torch.onnx etc. at
//                                                 start, as before lazy imports: a baseline)
//        manypy-bench-memory --child-interpreters N --archive A.mpk   (internal)
// With $MANYPY_BENCH_SMAPS_DIR set, every measured process's smaps is saved there.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "interpreters/pool.h"
#include "package_format/archive.h"
#include "server/allocator_info.h"
#include "server/lifecycle/python_model.h"
#include "server/lifecycle/warmup.h"
#include "tests/bench/bench_output.h"
#include "tests/test_util/resident_size.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr double kMiB = 1024.0 * 1024.0;
/// One line the interpreters child prints for the parent; other output of the
/// child (anything Python prints) is passed through to stderr.
constexpr const char* kChildPrefix = "MANYPY_MEMORY";
/// Every child and worker gets this many intra-op threads, so both modes carry
/// the same thread stacks and pools.
constexpr const char* kIntraOpThreads = "1";
/// --eager-imports: the children import PoolOptions::lazy_modules eagerly.
bool g_eager_imports = false;

/// A child or worker that has not reported within this long is killed.
constexpr double kChildTimeoutSeconds = 240;

/// Rounds of the measurements a target compares (bench_targets.py needs 5).
/// Memory barely depends on the machine's speed, but a step moves by up to
/// ~20 MiB between runs with where the heap happens to be trimmed, and time
/// to ready with the machine's load: rounds give each verdict its interval.
constexpr int kRounds = 5;

// ---------------------------------------------------------------------------
// /proc readers.

/// The fields of /proc/<pid>/smaps_rollup ("Rss", "Pss", "Anonymous", ...) in bytes.
std::map<std::string, uint64_t> ReadSmapsRollup(const std::string& pid) {
  std::map<std::string, uint64_t> fields;
  std::ifstream rollup("/proc/" + pid + "/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    size_t colon = line.find(':');
    // Skips the header line (a mapping range) and anything not in kB.
    if (colon == std::string::npos || line.size() < 2 ||
        line.compare(line.size() - 2, 2, "kB") != 0) {
      continue;
    }
    fields[line.substr(0, colon)] = std::stoull(line.substr(colon + 1)) * 1024;
  }
  return fields;
}

/// Where this process's resident memory is, by kind of mapping (bytes of Rss):
///   copies   the pool's prepared per-interpreter library copies (under its cache dir)
///   archive  the mapping of the model archive (the shared weights)
///   files    every other file-backed mapping (libtorch, the system's libraries)
///   anon     mappings without a file: heaps, Python objects, tensors, thread stacks
/// plus anon_in_files, the Anonymous (copied-on-write) part of the file-backed
/// mappings: relocated data and GOT pages of each library copy live there.
std::map<std::string, uint64_t> ResidentByKind(const std::string& cache_dir,
                                               const std::string& archive) {
  std::map<std::string, uint64_t> kinds{
      {"copies", 0}, {"archive", 0}, {"files", 0}, {"anon", 0}, {"anon_in_files", 0}};
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::string kind = "anon";
  while (std::getline(smaps, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.empty()) continue;
    if (first.back() != ':') {
      // A mapping header: range, perms, offset, dev, inode, then the path (may be empty).
      std::string perms, offset, dev, inode, path;
      fields >> perms >> offset >> dev >> inode;
      std::getline(fields, path);
      path.erase(0, path.find_first_not_of(' '));
      if (path.empty() || path[0] == '[') {
        kind = "anon";
      } else if (path.rfind(cache_dir + "/", 0) == 0) {
        kind = "copies";
      } else if (path == archive) {
        kind = "archive";
      } else {
        kind = "files";
      }
      continue;
    }
    uint64_t kb = 0;
    fields >> kb;
    if (first == "Rss:") kinds[kind] += kb * 1024;
    if (first == "Anonymous:" && kind != "anon") kinds["anon_in_files"] += kb * 1024;
  }
  return kinds;
}

/// For looking into where memory goes: with $MANYPY_BENCH_SMAPS_DIR set, every
/// measured process's /proc/<pid>/smaps is copied there as `name`.smaps.
void SaveSmaps(const std::string& pid, const std::string& name) {
  const char* dir = getenv("MANYPY_BENCH_SMAPS_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ifstream in("/proc/" + pid + "/smaps");
  std::ofstream out(std::string(dir) + "/" + name + ".smaps");
  out << in.rdbuf();
}

// ---------------------------------------------------------------------------
// Child processes.

/// This program's environment with OMP_NUM_THREADS set, for every child.
std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "OMP_NUM_THREADS=", 16) != 0) env.emplace_back(*e);
  }
  env.push_back(std::string("OMP_NUM_THREADS=") + kIntraOpThreads);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// A started child: its stdout (and optionally stdin) are pipes held here.
struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;
  int stdin_fd = -1;   ///< write end of the child's stdin; -1 if it inherited ours
  std::string buffer;  ///< read from stdout, not yet returned as a line
};

/// Starts `argv` with its stdout on a pipe (and its stdin on one if `pipe_stdin`);
/// stderr is inherited. Our pipe ends are close-on-exec, so one worker never
/// holds another's stdin open (which would keep it from ever seeing EOF).
std::optional<Child> Spawn(std::vector<std::string> argv, bool pipe_stdin) {
  int out[2], in[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  if (pipe_stdin && pipe2(in, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);  // dup2 clears CLOEXEC
  if (pipe_stdin) posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> c_argv = CStrings(argv), c_env = CStrings(env);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (pipe_stdin) close(in[0]);
  if (rc != 0) {
    fprintf(stderr, "manypy-bench-memory: cannot start %s: %s\n", argv[0].c_str(), strerror(rc));
    close(out[0]);
    if (pipe_stdin) close(in[1]);
    return std::nullopt;
  }
  Child child;
  child.pid = pid;
  child.stdout_fd = out[0];
  child.stdin_fd = pipe_stdin ? in[1] : -1;
  return child;
}

/// The child's next stdout line (without the newline), or nullopt at EOF or
/// once `deadline` has passed.
std::optional<std::string> ReadLine(Child& child, Clock::time_point deadline) {
  while (true) {
    size_t newline = child.buffer.find('\n');
    if (newline != std::string::npos) {
      std::string line = child.buffer.substr(0, newline);
      child.buffer.erase(0, newline + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{child.stdout_fd, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    ssize_t n = read(child.stdout_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    child.buffer.append(chunk, static_cast<size_t>(n));
  }
}

/// Closes our pipe ends (a worker sees EOF on stdin and exits), kills the
/// child if `kill_it`, and reaps it. Returns true if it exited with status 0.
bool Finish(Child& child, bool kill_it) {
  if (child.stdin_fd >= 0) close(child.stdin_fd);
  child.stdin_fd = -1;
  if (kill_it) kill(child.pid, SIGKILL);
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  close(child.stdout_fd);
  child.stdout_fd = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// "key=value key=value" -> map (the child's report line, after the prefix).
std::map<std::string, double> ParseKeyValues(const std::string& text) {
  std::map<std::string, double> values;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq != std::string::npos) values[word.substr(0, eq)] = std::stod(word.substr(eq + 1));
  }
  return values;
}

// ---------------------------------------------------------------------------
// The two modes. A measurement is a record plus what explains it.

struct Measurement {
  std::string mode;
  size_t workers = 0;
  uint64_t rss_bytes = 0;
  double load_seconds = 0;
  uint64_t pss_bytes = 0;                 ///< summed PSS (processes: read while all are alive)
  uint64_t anonymous_bytes = 0;           ///< summed Anonymous
  std::map<std::string, uint64_t> kinds;  ///< interpreters only: ResidentByKind
  std::vector<uint64_t> rounds_rss_bytes;  ///< each round's rss_bytes, if measured in rounds
};

using Measure = std::function<std::optional<Measurement>()>;

/// Runs every measurement of `jobs` in kRounds rounds, forward then backward
/// (so that within each pair which one runs first alternates); each job's
/// result is its median round by rss_bytes, with every round's in
/// rounds_rss_bytes. nullopt if any run failed.
std::optional<std::vector<Measurement>> MeasureInRounds(const std::vector<Measure>& jobs) {
  std::vector<std::vector<Measurement>> runs(jobs.size());
  for (int round = 0; round < kRounds; ++round) {
    for (size_t k = 0; k < jobs.size(); ++k) {
      size_t j = round % 2 == 0 ? k : jobs.size() - 1 - k;
      auto m = jobs[j]();
      if (!m) return std::nullopt;
      runs[j].push_back(*m);
    }
    fprintf(stderr, "round %d/%d done\n", round + 1, kRounds);
  }
  std::vector<Measurement> out;
  for (auto& r : runs) {
    std::vector<uint64_t> rss;
    for (const auto& m : r) rss.push_back(m.rss_bytes);
    std::vector<Measurement> sorted = r;
    std::sort(sorted.begin(), sorted.end(),
              [](const Measurement& a, const Measurement& b) { return a.rss_bytes < b.rss_bytes; });
    Measurement median = sorted[sorted.size() / 2];
    median.rounds_rss_bytes = rss;
    out.push_back(median);
  }
  return out;
}

/// The interpreters mode's child: pool of `n`, load, one inference, report, exit.
int RunChild(size_t n, const std::string& archive, bool eager_imports) {
  try {
    auto start = Clock::now();
    manypy::PoolOptions options;
    options.interpreters = n;
    if (eager_imports) {  // for comparison: import as before
      options.lazy_modules.clear();
      options.lazy_functions.clear();
      options.lazy_values.clear();
    }
    options.intra_op_threads = std::atoi(kIntraOpThreads);
    auto pool = manypy::InterpreterPool::Create(options);
    if (!pool.ok()) {
      fprintf(stderr, "child: the pool failed to start: %s\n", pool.status().ToString().c_str());
      return 1;
    }
    auto model = manypy::PythonModel::Load(pool->get(), archive);
    if (!model.ok()) {
      fprintf(stderr, "child: %s\n", model.status().ToString().c_str());
      return 1;
    }
    double load_seconds = SecondsSince(start);
    // One call, through the pool's load balancer: the interpreter it lands on
    // allocates what a first request does; the weights are touched once for all.
    // Inputs from the signature (zeros; batch and variable dimensions 1).
    auto called = (*model)->Call(manypy::SignatureInputs((*model)->manifest()));
    if (!called.ok()) {
      fprintf(stderr, "child: %s\n", called.status().ToString().c_str());
      return 1;
    }

    std::error_code ec;
    std::string archive_path = std::filesystem::canonical(archive, ec).string();
    auto kinds = ResidentByKind((*pool)->options().cache_dir, archive_path);
    auto rollup = ReadSmapsRollup("self");
    SaveSmaps("self", "interpreters-" + std::to_string(n));
    printf("\n%s rss=%llu load=%.3f pss=%llu anonymous=%llu", kChildPrefix,
           static_cast<unsigned long long>(std::max<int64_t>(0, manypy::testing::ResidentBytes())),
           load_seconds,
           static_cast<unsigned long long>(rollup["Pss"]),
           static_cast<unsigned long long>(rollup["Anonymous"]));
    for (const auto& [kind, bytes] : kinds) {
      printf(" %s=%llu", kind.c_str(), static_cast<unsigned long long>(bytes));
    }
    printf("\n");
    fflush(stdout);
  } catch (const std::exception& e) {
    fprintf(stderr, "child: %s\n", e.what());
    return 1;
  }
  return 0;
}

std::optional<Measurement> MeasureInterpreters(size_t n, const std::string& archive) {
  // /proc/self/exe, not the path it names: this very program runs even if a
  // concurrent build has replaced (unlinked) the file since we started.
  std::vector<std::string> argv{"/proc/self/exe", "--child-interpreters", std::to_string(n),
                                "--archive", archive};
  if (g_eager_imports) argv.push_back("--eager-imports");
  auto child = Spawn(argv, /*pipe_stdin=*/false);
  if (!child) return std::nullopt;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(kChildTimeoutSeconds));
  std::optional<Measurement> m;
  while (auto line = ReadLine(*child, deadline)) {
    size_t at = line->find(kChildPrefix);
    if (at == std::string::npos) {
      if (!line->empty()) fprintf(stderr, "  child: %s\n", line->c_str());
      continue;
    }
    auto values = ParseKeyValues(line->substr(at + strlen(kChildPrefix)));
    m.emplace();
    m->mode = "interpreters";
    m->workers = n;
    m->rss_bytes = static_cast<uint64_t>(values["rss"]);
    m->load_seconds = values["load"];
    m->pss_bytes = static_cast<uint64_t>(values["pss"]);
    m->anonymous_bytes = static_cast<uint64_t>(values["anonymous"]);
    for (const char* kind : {"copies", "archive", "files", "anon", "anon_in_files"}) {
      m->kinds[kind] = static_cast<uint64_t>(values[kind]);
    }
    // Read on to EOF: the child finalizes its interpreters and may still print,
    // and must not block on a full pipe nobody reads.
  }
  // A child still running at the deadline is killed.
  bool ok = Finish(*child, /*kill_it=*/!m);
  if (!ok) {
    fprintf(stderr, "manypy-bench-memory: the %zu-interpreter child failed\n", n);
    return std::nullopt;
  }
  return m;
}

/// Parses "<word> <number>" from a worker; nullopt if the line is not that.
std::optional<double> WorkerValue(const std::optional<std::string>& line, const std::string& word) {
  if (!line || line->rfind(word + " ", 0) != 0) return std::nullopt;
  return std::stod(line->substr(word.size() + 1));
}

std::optional<Measurement> MeasureProcesses(size_t n, const std::string& archive,
                                            const std::string& python, const std::string& worker) {
  Measurement m;
  m.mode = "processes";
  m.workers = n;
  std::vector<Child> children;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(kChildTimeoutSeconds));
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) {
    auto child = Spawn({python, worker, archive}, /*pipe_stdin=*/true);
    if (child) children.push_back(std::move(*child));
    ok = child.has_value();
  }
  // Blocking on each worker in turn returns after the last of them has loaded.
  for (auto& c : children) {
    if (!ok) break;
    ok = WorkerValue(ReadLine(c, deadline), "loaded").has_value();
  }
  m.load_seconds = SecondsSince(start);
  for (auto& c : children) {
    if (!ok) break;
    auto rss = WorkerValue(ReadLine(c, deadline), "rss");
    ok = rss.has_value();
    if (ok) m.rss_bytes += static_cast<uint64_t>(*rss);
  }
  // Every worker has reported and is waiting on stdin: all N are alive now,
  // so each one's PSS divides the shared pages among exactly N.
  for (size_t i = 0; i < children.size() && ok; ++i) {
    const Child& c = children[i];
    auto rollup = ReadSmapsRollup(std::to_string(c.pid));
    SaveSmaps(std::to_string(c.pid), "processes-" + std::to_string(n) + "-" + std::to_string(i));
    m.pss_bytes += rollup["Pss"];
    m.anonymous_bytes += rollup["Anonymous"];
  }
  for (auto& c : children) ok = Finish(c, /*kill_it=*/!ok) && ok;
  if (!ok) {
    fprintf(stderr, "manypy-bench-memory: %zu worker process(es) failed (see above)\n", n);
    return std::nullopt;
  }
  return m;
}

// ---------------------------------------------------------------------------
// Output.

void PrintTable(const std::string& model, const std::vector<Measurement>& ms) {
  printf("%-10s %-13s %7s %10s %10s %9s %9s %9s %9s %9s %9s\n", "model", "mode", "workers",
         "rss MiB", "load s", "pss MiB", "anon MiB", "(copies", "archive", "files", "anon)");
  for (const auto& m : ms) {
    printf("%-10s %-13s %7zu %10.1f %10.2f %9.1f %9.1f", model.c_str(), m.mode.c_str(), m.workers,
           m.rss_bytes / kMiB, m.load_seconds, m.pss_bytes / kMiB, m.anonymous_bytes / kMiB);
    if (!m.kinds.empty()) {
      for (const char* kind : {"copies", "archive", "files", "anon"}) {
        printf(" %9.1f", m.kinds.at(kind) / kMiB);
      }
    }
    printf("\n");
  }
  printf(
      "(rss: VmRSS, summed over the processes; pss/anon: summed PSS and anonymous memory; "
      "in parentheses: the pool process's RSS by mapping: prepared library copies, the "
      "archive mapping, other files, anonymous)\n");
}

const Measurement* Find(const std::vector<Measurement>& ms, const std::string& mode, size_t n) {
  for (const auto& m : ms) {
    if (m.mode == mode && m.workers == n) return &m;
  }
  return nullptr;
}

/// Prints the figures the targets compare and the per-extra-interpreter
/// breakdown that explains them (the verdicts: bench_targets.py).
void PrintTargetFigures(const std::vector<Measurement>& ms, size_t max_n, uint64_t weight_bytes) {
  const Measurement* pool = Find(ms, "interpreters", max_n);
  const Measurement* procs = Find(ms, "processes", max_n);
  if (pool && procs) {
    printf(
        "%zu-interpreter pool RSS vs %zu processes' summed RSS (median rounds): %.1f / %.1f MiB "
        "= %.2fx (by PSS: %.2fx)\n",
        max_n, max_n, pool->rss_bytes / kMiB, procs->rss_bytes / kMiB,
        static_cast<double>(pool->rss_bytes) / static_cast<double>(procs->rss_bytes),
        static_cast<double>(pool->pss_bytes) / static_cast<double>(procs->pss_bytes));
  }
  // Growth is compared on the whole range, 1 -> max_n interpreters, averaged per
  // extra interpreter; the steps in between are printed for the reader. A single
  // step moves by up to ~20 MiB between runs with where the heap happens to
  // be trimmed after the inference's large temporary allocations.
  const Measurement* one = Find(ms, "interpreters", 1);
  for (const auto& m : ms) {
    if (!one || m.mode != "interpreters" || m.workers <= 1) continue;
    double extra = static_cast<double>(m.workers - 1);
    auto per_extra = [&](uint64_t at_n, uint64_t at_one) {
      return (static_cast<double>(at_n) - static_cast<double>(at_one)) / extra;
    };
    printf("pool RSS growth per extra interpreter, 1 -> %zu: %.1f MiB (weights: %.1f MiB)\n",
           m.workers, per_extra(m.rss_bytes, one->rss_bytes) / kMiB, weight_bytes / kMiB);
    printf(
        "          1 -> %zu, per extra interpreter: copies %+.1f, archive %+.1f, files %+.1f, "
        "anon %+.1f MiB (copied-on-write pages inside file mappings: %+.1f MiB)\n",
        m.workers, per_extra(m.kinds.at("copies"), one->kinds.at("copies")) / kMiB,
        per_extra(m.kinds.at("archive"), one->kinds.at("archive")) / kMiB,
        per_extra(m.kinds.at("files"), one->kinds.at("files")) / kMiB,
        per_extra(m.kinds.at("anon"), one->kinds.at("anon")) / kMiB,
        per_extra(m.kinds.at("anon_in_files"), one->kinds.at("anon_in_files")) / kMiB);
  }
}

/// (value at N - value at 1) / (N - 1): what each interpreter past the first adds.
double PerExtra(uint64_t at_n, uint64_t at_one, size_t n) {
  return (static_cast<double>(at_n) - static_cast<double>(at_one)) / static_cast<double>(n - 1);
}

/// Time to ready of manypy-server with a whole repository at N interpreters.
struct ReadyMeasurement {
  size_t workers = 0;
  double ready_seconds = 0;
  size_t models_ready = 0;
  std::vector<double> rounds_ready_seconds;  ///< each round's, if measured in rounds
};

/// ", \"name\": [a, b, ...]" for a JSON record, or "" when `values` is empty.
template <typename T>
std::string JsonList(const char* name, const std::vector<T>& values, const char* format) {
  if (values.empty()) return "";
  std::string out = std::string(", \"") + name + "\": [";
  char item[64];
  for (size_t i = 0; i < values.size(); ++i) {
    snprintf(item, sizeof item, format, values[i]);
    out += (i ? ", " : "") + std::string(item);
  }
  return out + "]";
}

/// One JSON record per line of `out`; the model name is validated by the
/// manifest parser, the modes are ours: nothing to escape.
void AppendRecords(std::vector<std::string>& out, const std::string& model,
                   const std::vector<Measurement>& ms, uint64_t weight_bytes) {
  const Measurement* one = Find(ms, "interpreters", 1);
  for (const Measurement& m : ms) {
    char line[512];
    int len = snprintf(line, sizeof line,
                       "  {\"model\": \"%s\", \"mode\": \"%s\", \"workers\": %zu, "
                       "\"rss_bytes\": %llu, \"pss_bytes\": %llu, \"load_seconds\": %.3f",
                       model.c_str(), m.mode.c_str(), m.workers,
                       static_cast<unsigned long long>(m.rss_bytes),
                       static_cast<unsigned long long>(m.pss_bytes), m.load_seconds);
    std::string record(line, static_cast<size_t>(len));
    if (m.mode == "interpreters" && one != nullptr && m.workers > 1) {
      // 1 -> N, per interpreter past the first: by RSS (every mapping counted
      // in full) and by PSS (pages mapped more than once counted once).
      snprintf(line, sizeof line,
               ", \"per_extra_interpreter_bytes\": %.0f, \"per_extra_interpreter_pss_bytes\": %.0f",
               PerExtra(m.rss_bytes, one->rss_bytes, m.workers),
               PerExtra(m.pss_bytes, one->pss_bytes, m.workers));
      record += line;
    }
    std::vector<unsigned long long> rounds(m.rounds_rss_bytes.begin(), m.rounds_rss_bytes.end());
    record += JsonList("rounds_rss_bytes", rounds, "%llu");
    if (weight_bytes > 0) record += ", \"weight_bytes\": " + std::to_string(weight_bytes);
    out.push_back(record + "}");
  }
}

bool WriteJson(const std::string& path, const std::vector<std::string>& records) {
  FILE* f = manypy::bench::OpenOutputFile(path);
  if (f == nullptr) return false;
  fprintf(f, "[\n");
  for (size_t i = 0; i < records.size(); ++i) {
    fprintf(f, "%s%s\n", records[i].c_str(), i + 1 < records.size() ? "," : "");
  }
  fprintf(f, "]\n");
  return fclose(f) == 0;
}

/// Prints the small model's per-extra-interpreter growth (its target's
/// verdict: bench_targets.py).
void PrintSmallGrowth(const std::string& model, const std::vector<Measurement>& ms) {
  const Measurement* one = Find(ms, "interpreters", 1);
  for (const auto& m : ms) {
    if (!one || m.workers <= 1) continue;
    double rss = PerExtra(m.rss_bytes, one->rss_bytes, m.workers);
    double pss = PerExtra(m.pss_bytes, one->pss_bytes, m.workers);
    printf("%s: 1 -> %zu interpreters, per extra interpreter: RSS %+.1f MiB, PSS %+.1f MiB "
           "(copies %+.1f, files %+.1f, anon %+.1f MiB)\n",
           model.c_str(), m.workers, rss / kMiB, pss / kMiB,
           PerExtra(m.kinds.at("copies"), one->kinds.at("copies"), m.workers) / kMiB,
           PerExtra(m.kinds.at("files"), one->kinds.at("files"), m.workers) / kMiB,
           PerExtra(m.kinds.at("anon"), one->kinds.at("anon"), m.workers) / kMiB);
  }
}

/// Starts manypy-server on `repository` with `n` interpreters (free ports)
/// and returns the wall time until it prints its "listening on ... model(s)
/// ready" line, i.e. every model of the repository loaded and warmed up;
/// then stops it (SIGTERM).
std::optional<ReadyMeasurement> MeasureReady(size_t n, const std::string& server,
                                             const std::string& repository) {
  auto start = Clock::now();
  auto child = Spawn({server, "--model-repository=" + repository,
                      "--interpreters=" + std::to_string(n), "--grpc-port=0", "--http-port=0",
                      "--metrics-port=0", "--grpc-address=127.0.0.1", "--http-address=127.0.0.1",
                      "--metrics-address=127.0.0.1", "--log-level=warning"},
                     /*pipe_stdin=*/false);
  if (!child) return std::nullopt;
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(kChildTimeoutSeconds));
  std::optional<ReadyMeasurement> r;
  while (auto line = ReadLine(*child, deadline)) {
    size_t at = line->find("manypy-server: listening on ");
    if (at == std::string::npos) continue;
    r.emplace();
    r->workers = n;
    r->ready_seconds = SecondsSince(start);
    size_t comma = line->find(", ", at);
    if (comma != std::string::npos) r->models_ready = std::stoul(line->substr(comma + 2));
    break;
  }
  kill(child->pid, r ? SIGTERM : SIGKILL);
  // Drain to EOF so the server never blocks on a full pipe while stopping.
  auto stop_deadline = Clock::now() + std::chrono::seconds(60);
  while (ReadLine(*child, stop_deadline)) {
  }
  Finish(*child, /*kill_it=*/Clock::now() >= stop_deadline);
  if (!r) fprintf(stderr, "manypy-bench-memory: the %zu-interpreter server never became ready\n", n);
  return r;
}

// ---------------------------------------------------------------------------
// Flags.

struct Flags {
  std::string archive;
  std::string out;
  std::string python = "/usr/bin/python3";  // Debian's, where python3-torch lives
  std::string worker = MANYPY_SOURCE_DIR "/tests/bench/memory_worker.py";
  std::vector<size_t> workers{1, 2, 4};
  size_t child_interpreters = 0;  ///< > 0: this is an interpreters-mode child
  std::string small_archive;      ///< optional: a model needing only torch, pool only
  std::string repository;         ///< optional: time to ready of manypy-server with it
  std::string server;             ///< manypy-server; default: beside this program
};

[[noreturn]] void Usage(const std::string& why) {
  fprintf(stderr,
          "manypy-bench-memory: %s\n"
          "usage: manypy-bench-memory --archive A.mpk --out PATH [--workers 1,2,4]\n"
          "                           [--python /usr/bin/python3] [--worker memory_worker.py]\n"
          "                           [--small-archive B.mpk] [--repository DIR]\n"
          "                           [--server manypy-server] [--eager-imports]\n"
          "  --archive's model must take one FP32 [1, 3, 224, 224] image (the worker\n"
          "  processes call it so); --small-archive's is measured in the pool only\n",
          why.c_str());
  exit(2);
}

size_t ParseCount(const std::string& text) {
  char* end = nullptr;
  unsigned long v = strtoul(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || v == 0 || v > 64) Usage("bad count '" + text + "'");
  return v;
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--archive") {
      flags.archive = value();
    } else if (arg == "--out") {
      flags.out = value();
    } else if (arg == "--python") {
      flags.python = value();
    } else if (arg == "--worker") {
      flags.worker = value();
    } else if (arg == "--eager-imports") {
      g_eager_imports = true;
    } else if (arg == "--small-archive") {
      flags.small_archive = value();
    } else if (arg == "--repository") {
      flags.repository = value();
    } else if (arg == "--server") {
      flags.server = value();
    } else if (arg == "--child-interpreters") {
      flags.child_interpreters = ParseCount(value());
    } else if (arg == "--workers") {
      std::string list = value();
      flags.workers.clear();
      for (size_t pos = 0; pos <= list.size();) {
        size_t comma = std::min(list.find(',', pos), list.size());
        flags.workers.push_back(ParseCount(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
      std::sort(flags.workers.begin(), flags.workers.end());
      flags.workers.erase(std::unique(flags.workers.begin(), flags.workers.end()),
                          flags.workers.end());
    } else {
      Usage("unknown flag " + arg);
    }
  }
  if (flags.archive.empty()) Usage("--archive is required");
  if (flags.child_interpreters == 0 && flags.out.empty()) Usage("--out is required");
  return flags;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  if (flags.child_interpreters > 0) {
    return RunChild(flags.child_interpreters, flags.archive, g_eager_imports);
  }
  auto start = Clock::now();

  // The weight size the per-interpreter growth is compared with: the bytes of
  // the archive's stored tensors, which a worker process copies and the pool shares.
  auto archive = manypy::PackageArchive::Open(flags.archive);
  if (!archive.ok()) {
    fprintf(stderr, "manypy-bench-memory: %s\n", archive.status().ToString().c_str());
    return 1;
  }
  const std::string model = (*archive)->manifest().name;
  uint64_t weight_bytes = 0;
  for (const auto& s : (*archive)->storages()) weight_bytes += s.size;
  archive->reset();  // the children open it themselves
  fprintf(stderr, "%s: %.1f MiB of weights in %s; the pool's malloc: %s\n", model.c_str(),
          weight_bytes / kMiB, flags.archive.c_str(), manypy::MallocName().c_str());

  // Warm-up, not recorded: the first pool ever created on a machine prepares
  // (copies and patches) the per-interpreter libraries into the on-disk cache,
  // and the first load reads the archive and libtorch from disk. One throwaway
  // child with the most interpreters measured does both, so every load_seconds
  // below is a warm start, as a restarted server or worker would see it.
  auto t = Clock::now();
  if (!MeasureInterpreters(flags.workers.back(), flags.archive)) return 1;
  fprintf(stderr, "warm-up (%zu interpreters, library cache filled) in %.1f s\n",
          flags.workers.back(), SecondsSince(t));

  const size_t low = flags.workers.front(), high = flags.workers.back();
  auto pool_job = [&](size_t n, const std::string& path, const std::string& label) -> Measure {
    return [&, n, path, label] {
      auto t0 = Clock::now();
      auto m = MeasureInterpreters(n, path);
      if (m) {
        fprintf(stderr, "%s interpreters N=%zu: rss %.1f MiB, loaded in %.2f s (child ran %.1f s)\n",
                label.c_str(), n, m->rss_bytes / kMiB, m->load_seconds, SecondsSince(t0));
      }
      return m;
    };
  };
  auto processes_job = [&](size_t n) -> Measure {
    return [&, n] {
      auto t0 = Clock::now();
      auto m = MeasureProcesses(n, flags.archive, flags.python, flags.worker);
      if (m) {
        fprintf(stderr, "%s processes    N=%zu: rss %.1f MiB, loaded in %.2f s (ran %.1f s)\n",
                model.c_str(), n, m->rss_bytes / kMiB, m->load_seconds, SecondsSince(t0));
      }
      return m;
    };
  };
  // What the targets compare, in rounds: the pool at the fewest and most
  // interpreters (growth) and the most against as many processes (the ratio).
  std::vector<Measurement> ms;
  {
    std::vector<Measure> jobs{pool_job(low, flags.archive, model)};
    if (high != low) jobs.push_back(pool_job(high, flags.archive, model));
    jobs.push_back(processes_job(high));
    auto rounds = MeasureInRounds(jobs);
    if (!rounds) return 1;
    ms = *rounds;
  }
  // The other counts once, for the table and the plot; in order of mode, then N.
  for (size_t n : flags.workers) {
    if (n == low || n == high) continue;
    auto m = pool_job(n, flags.archive, model)();
    if (!m) return 1;
    ms.push_back(*m);
  }
  for (size_t n : flags.workers) {
    if (n == high) continue;
    auto m = processes_job(n)();
    if (!m) return 1;
    ms.push_back(*m);
  }
  std::stable_sort(ms.begin(), ms.end(), [](const Measurement& a, const Measurement& b) {
    return a.mode != b.mode ? a.mode < b.mode : a.workers < b.workers;
  });

  std::string small_model;
  std::vector<Measurement> small;
  if (!flags.small_archive.empty()) {
    auto small_archive = manypy::PackageArchive::Open(flags.small_archive);
    if (!small_archive.ok()) {
      fprintf(stderr, "manypy-bench-memory: %s\n", small_archive.status().ToString().c_str());
      return 1;
    }
    small_model = (*small_archive)->manifest().name;
    small_archive->reset();
    std::vector<Measure> jobs{pool_job(low, flags.small_archive, small_model)};
    if (high != low) jobs.push_back(pool_job(high, flags.small_archive, small_model));
    auto rounds = MeasureInRounds(jobs);
    if (!rounds) return 1;
    small = *rounds;
    for (size_t n : flags.workers) {
      if (n == low || n == high) continue;
      auto m = pool_job(n, flags.small_archive, small_model)();
      if (!m) return 1;
      small.push_back(*m);
    }
    std::stable_sort(small.begin(), small.end(), [](const Measurement& a, const Measurement& b) {
      return a.workers < b.workers;
    });
  }
  std::vector<ReadyMeasurement> ready;
  if (!flags.repository.empty()) {
    std::string server = flags.server;
    if (server.empty()) {
      std::error_code ec;
      server = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() /
                "manypy-server").string();
    }
    for (size_t n : flags.workers) {
      // The target (< 10 s) is at 2 interpreters: that one in rounds, its median kept.
      std::vector<ReadyMeasurement> runs;
      for (int i = 0; i < (n == 2 ? kRounds : 1); ++i) {
        auto r = MeasureReady(n, server, flags.repository);
        if (!r) return 1;
        fprintf(stderr, "server N=%zu: %zu model(s) ready in %.2f s\n", n, r->models_ready,
                r->ready_seconds);
        runs.push_back(*r);
      }
      std::vector<double> seconds;
      for (const auto& r : runs) seconds.push_back(r.ready_seconds);
      std::sort(runs.begin(), runs.end(), [](const ReadyMeasurement& a, const ReadyMeasurement& b) {
        return a.ready_seconds < b.ready_seconds;
      });
      ReadyMeasurement median = runs[runs.size() / 2];
      if (runs.size() > 1) median.rounds_ready_seconds = seconds;
      ready.push_back(median);
    }
  }

  PrintTable(model, ms);
  PrintTargetFigures(ms, high, weight_bytes);
  if (!small.empty()) {
    PrintTable(small_model, small);
    PrintSmallGrowth(small_model, small);
  }
  for (const auto& r : ready) {
    printf("server ready with %s, %zu interpreter(s): %.2f s (%zu models)%s\n",
           flags.repository.c_str(), r.workers, r.ready_seconds, r.models_ready,
           r.rounds_ready_seconds.empty() ? "" : " (median round)");
  }
  printf("verdicts: /usr/bin/python3 tests/bench/bench_targets.py --only memory --results %s\n",
         std::filesystem::path(flags.out).parent_path().string().c_str());
  // The --archive model's records first (bench_report plots those).
  std::vector<std::string> records;
  AppendRecords(records, model, ms, weight_bytes);
  AppendRecords(records, small_model, small, 0);
  for (const auto& r : ready) {
    char line[256];
    snprintf(line, sizeof line,
             "  {\"model\": \"repository\", \"mode\": \"server\", \"workers\": %zu, "
             "\"ready_seconds\": %.3f, \"models_ready\": %zu",
             r.workers, r.ready_seconds, r.models_ready);
    records.push_back(line + JsonList("rounds_ready_seconds", r.rounds_ready_seconds, "%.3f") +
                      "}");
  }
  if (!WriteJson(flags.out, records)) {
    fprintf(stderr, "manypy-bench-memory: cannot write %s\n", flags.out.c_str());
    return 1;
  }
  fprintf(stderr, "wrote %s (%zu records) in %.0f s total\n", flags.out.c_str(), records.size(),
          SecondsSince(start));
  return 0;
}

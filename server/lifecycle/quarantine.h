// Quarantine: the models that crashed the server process twice within 10
// minutes (the crash lines server/crash/ appends to STATE_DIR/crashes, kept
// across restarts), which the lifecycle refuses to load until an explicit
// load, a newer version or --clear-quarantine lifts it. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "server/crash/crash_record.h"

namespace manypy {

class Quarantine {
 public:
  struct Options {
    std::string state_dir;
    bool clear = false;  ///< --clear-quarantine: forget every crash at start
    int crashes = 2;     ///< crashes blamed on a model ...
    std::chrono::seconds window{600};  ///< ... within this long quarantine it
  };

  /// Reads the crash lines (creating the folder, owner-only), drops those
  /// that quarantine nothing and are older than the window, and rewrites the
  /// file. INTERNAL naming the folder when it cannot be made, read or written.
  static StatusOr<std::unique_ptr<Quarantine>> Open(const Options& options, int64_t now_seconds);

  /// OK, or FAILED_PRECONDITION saying why `name` `version` must not load
  /// ("quarantined: crashed the server 2 times, last SIGSEGV in version 1 at
  /// ..."); a version newer than the ones that crashed is admitted.
  Status Admit(const std::string& name, int64_t version) const EXCLUDES(mu_);
  /// Forgets `name`'s crashes (in the file too); nothing when it has none.
  void Lift(const std::string& name) EXCLUDES(mu_);
  /// The reasons of every quarantined model, by name (for the start-up log).
  std::map<std::string, std::string> Reasons() const EXCLUDES(mu_);

 private:
  struct Verdict {
    int crashes = 0;
    CrashRecord last;
    int64_t newest_version = 0;
  };
  Quarantine(Options options, std::vector<CrashRecord> crashes);
  /// The verdicts of crashes_ (a model is in it when quarantined).
  void Judge() REQUIRES(mu_);
  /// crashes_ written back to the file (atomically: a new file renamed).
  Status Save() const REQUIRES(mu_);
  std::string ReasonLocked(const Verdict& v) const REQUIRES(mu_);

  const Options options_;
  const std::string path_;
  mutable Mutex mu_;
  std::vector<CrashRecord> crashes_ GUARDED_BY(mu_);
  std::map<std::string, Verdict> quarantined_ GUARDED_BY(mu_);
};

}  // namespace manypy

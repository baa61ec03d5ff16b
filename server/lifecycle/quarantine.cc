#include "server/lifecycle/quarantine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "server/log.h"

namespace manypy {
namespace {

std::string Utc(int64_t seconds) {
  time_t t = static_cast<time_t>(seconds);
  tm parts{};
  gmtime_r(&t, &parts);
  char text[32];
  strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<Quarantine>> Quarantine::Open(const Options& options, int64_t now_seconds) {
  // Owner-only: whoever writes it can quarantine models (SECURITY.md).
  std::error_code ec;
  const std::filesystem::path dir(options.state_dir);
  if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
  if (ec || (mkdir(options.state_dir.c_str(), 0700) != 0 && errno != EEXIST)) {
    return Internal("--crash-state-dir " + options.state_dir +
                    ": cannot create it: " + (ec ? ec.message() : strerror(errno)));
  }
  if (access(options.state_dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    return Internal("--crash-state-dir " + options.state_dir + ": " + strerror(errno) +
                    " (another user's folder?)");
  }
  std::vector<CrashRecord> crashes;
  std::ifstream in(options.state_dir + "/" + kCrashesFileName);
  for (std::string line; !options.clear && std::getline(in, line);) {
    if (auto record = ParseCrashLine(line)) crashes.push_back(std::move(*record));
  }
  std::sort(crashes.begin(), crashes.end(),
            [](const CrashRecord& a, const CrashRecord& b) { return a.time < b.time; });
  std::unique_ptr<Quarantine> q(new Quarantine(options, std::move(crashes)));
  MutexLock lock(q->mu_);
  q->Judge();
  // Crashes that quarantine nothing and can no longer count toward it go.
  const int64_t oldest = now_seconds - options.window.count();
  const size_t read = q->crashes_.size();
  q->crashes_.erase(std::remove_if(q->crashes_.begin(), q->crashes_.end(),
                                   [&](const CrashRecord& c) REQUIRES(q->mu_) {
                                     return c.time < oldest && q->quarantined_.count(c.model) == 0;
                                   }),
                    q->crashes_.end());
  if (options.clear || q->crashes_.size() != read) MANYPY_RETURN_IF_ERROR(q->Save());
  return q;
}

Quarantine::Quarantine(Options options, std::vector<CrashRecord> crashes)
    : options_(std::move(options)), path_(options_.state_dir + "/" + kCrashesFileName) {
  MutexLock lock(mu_);
  crashes_ = std::move(crashes);
}

void Quarantine::Judge() {
  quarantined_.clear();
  std::map<std::string, std::vector<const CrashRecord*>> by_model;
  for (const CrashRecord& c : crashes_) by_model[c.model].push_back(&c);  // in time order
  const size_t needed = static_cast<size_t>(std::max(1, options_.crashes));
  for (const auto& [model, list] : by_model) {
    // Any `needed` consecutive crashes within the window.
    bool quarantined = false;
    for (size_t i = 0; i + needed <= list.size() && !quarantined; ++i) {
      quarantined = list[i + needed - 1]->time - list[i]->time <= options_.window.count();
    }
    if (!quarantined) continue;
    Verdict v;
    v.crashes = static_cast<int>(list.size());
    v.last = *list.back();
    for (const CrashRecord* c : list) v.newest_version = std::max(v.newest_version, c->version);
    quarantined_[model] = v;
  }
}

Status Quarantine::Save() const {
  // Its own name: servers sharing the folder may save at the same time.
  const std::string fresh = path_ + ".new." + std::to_string(getpid());
  std::string text;
  for (const CrashRecord& c : crashes_) {
    char line[512];
    text.append(line, FormatCrashLine(line, sizeof(line), c.time, c.signal.c_str(),
                                      c.model.c_str(), c.version));
  }
  int fd = open(fresh.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool written = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) close(fd);
  if (!written) return Internal("--crash-state-dir: cannot write " + fresh + ": " + strerror(errno));
  if (rename(fresh.c_str(), path_.c_str()) != 0) {
    return Internal("--crash-state-dir: cannot replace " + path_ + ": " + strerror(errno));
  }
  return Status::Ok();
}

std::string Quarantine::ReasonLocked(const Verdict& v) const {
  return "quarantined: crashed the server " + std::to_string(v.crashes) + " times, last " +
         v.last.signal + " in version " + std::to_string(v.last.version) + " at " +
         Utc(v.last.time) +
         " (RepositoryModelLoad, a newer version or --clear-quarantine lifts it)";
}

Status Quarantine::Admit(const std::string& name, int64_t version) const {
  MutexLock lock(mu_);
  auto it = quarantined_.find(name);
  if (it == quarantined_.end() || version > it->second.newest_version) return Status::Ok();
  return FailedPrecondition(ReasonLocked(it->second));
}

void Quarantine::Lift(const std::string& name) {
  MutexLock lock(mu_);
  const size_t before = crashes_.size();
  crashes_.erase(std::remove_if(crashes_.begin(), crashes_.end(),
                                [&](const CrashRecord& c) { return c.model == name; }),
                 crashes_.end());
  if (crashes_.size() == before) return;
  const bool was_quarantined = quarantined_.count(name) > 0;
  Judge();
  if (Status saved = Save(); !saved.ok()) Log(LogLevel::kWarning, saved.message());
  if (was_quarantined) Log(LogLevel::kInfo, "model " + name + ": quarantine lifted");
}

std::map<std::string, std::string> Quarantine::Reasons() const {
  MutexLock lock(mu_);
  std::map<std::string, std::string> reasons;
  for (const auto& [name, v] : quarantined_) reasons[name] = ReasonLocked(v);
  return reasons;
}

}  // namespace manypy

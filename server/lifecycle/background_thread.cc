#include "server/lifecycle/background_thread.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/thread_name.h"

namespace manypy {

bool LowerThisThreadsPriority(int increment) {
  // On Linux, PRIO_PROCESS with a thread id sets that one thread's nice value.
  auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, tid);
  if (nice == -1 && errno != 0) return false;
  return setpriority(PRIO_PROCESS, tid, std::min(nice + increment, 19)) == 0;
}

BackgroundThread::BackgroundThread(const char* name, int nice_increment)
    : thread_([this, name, nice_increment] { Loop(name, nice_increment); }) {}

BackgroundThread::~BackgroundThread() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundThread::Run(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  std::future<void> done = packaged.get_future();
  {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(packaged));
  }
  cv_.notify_all();
  done.get();  // rethrows what the task threw
}

void BackgroundThread::Post(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    tasks_.emplace_back(std::move(task));
  }
  cv_.notify_all();
}

void BackgroundThread::Loop(const char* name, int nice_increment) {
  NameThisThread(name);
  // A refusal (a seccomp profile, say) leaves the thread at normal priority:
  // slower requests during loads, nothing worse.
  LowerThisThreadsPriority(nice_increment);
  MutexLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [this]() REQUIRES(mu_) { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, nothing left
    std::packaged_task<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.Unlock();
    task();
    lock.Lock();
  }
}

}  // namespace manypy

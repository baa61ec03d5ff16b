#include "server/crash/running_calls.h"

#include <cstring>

namespace manypy {
namespace {

RunningCall g_calls[kMaxRunningCallSlots];
// initial-exec: the crash handler reads it, and a dynamic TLS access may allocate.
__thread int g_current_slot __attribute__((tls_model("initial-exec"))) = -1;
LoadingModel g_loads[kMaxLoadingModels];
__thread int g_current_load __attribute__((tls_model("initial-exec"))) = -1;

void CopyBounded(char* to, size_t capacity, const char* from, size_t length) {
  if (length >= capacity) length = capacity - 1;
  memcpy(to, from, length);
  to[length] = '\0';
}

// Rewrites `e` as a seqlock writer: readers that see an odd generation (or a
// changed one) know the entry was being written.
void Write(RunningCall* e, bool busy, int64_t version, uint32_t requests, const char* model,
           size_t model_length, const char* id, size_t id_length) {
  e->generation.fetch_add(1, std::memory_order_acq_rel);
  e->busy = busy;
  e->version = version;
  e->requests = requests;
  CopyBounded(e->model, sizeof(e->model), model, model_length);
  CopyBounded(e->request_id, sizeof(e->request_id), id, id_length);
  e->generation.fetch_add(1, std::memory_order_release);
}

}  // namespace

RunningCall* RunningCallAt(size_t slot) {
  return slot < kMaxRunningCallSlots ? &g_calls[slot] : nullptr;
}

int CurrentRunningCallSlot() { return g_current_slot; }

ScopedRunningCall::ScopedRunningCall(size_t slot, const std::string& model, int64_t version,
                                     const std::string& request_id, size_t requests)
    : entry_(RunningCallAt(slot)), previous_slot_(g_current_slot) {
  if (entry_ == nullptr) return;
  was_busy_ = entry_->busy;
  was_version_ = entry_->version;
  was_requests_ = entry_->requests;
  memcpy(was_model_, entry_->model, sizeof(was_model_));
  memcpy(was_request_id_, entry_->request_id, sizeof(was_request_id_));
  Write(entry_, true, version, static_cast<uint32_t>(requests), model.data(), model.size(),
        request_id.data(), request_id.size());
  g_current_slot = static_cast<int>(slot);
}

ScopedRunningCall::~ScopedRunningCall() {
  if (entry_ == nullptr) return;
  Write(entry_, was_busy_, was_version_, was_requests_, was_model_, strlen(was_model_),
        was_request_id_, strlen(was_request_id_));
  g_current_slot = previous_slot_;
}

LoadingModel* LoadingModelAt(size_t index) {
  return index < kMaxLoadingModels ? &g_loads[index] : nullptr;
}

int CurrentLoadingModel() { return g_current_load; }

ScopedLoadingModel::ScopedLoadingModel(const std::string& model, int64_t version)
    : previous_(g_current_load) {
  for (size_t i = 0; i < kMaxLoadingModels; ++i) {
    bool free = false;
    if (!g_loads[i].claimed.compare_exchange_strong(free, true)) continue;
    LoadingModel& e = g_loads[i];
    e.generation.fetch_add(1, std::memory_order_acq_rel);
    e.version = version;
    CopyBounded(e.model, sizeof(e.model), model.data(), model.size());
    e.generation.fetch_add(1, std::memory_order_release);
    index_ = static_cast<int>(i);
    g_current_load = index_;
    return;
  }
}

ScopedLoadingModel::~ScopedLoadingModel() {
  if (index_ < 0) return;
  g_loads[index_].claimed.store(false, std::memory_order_release);
  g_current_load = previous_;
}

}  // namespace manypy

#include "server/inference/request_trace.h"

#include <atomic>

namespace manypy {
namespace {
std::atomic<RequestTracer*> g_tracer{nullptr};
}  // namespace

void SetRequestTracer(RequestTracer* tracer) { g_tracer.store(tracer); }
RequestTracer* GetRequestTracer() { return g_tracer.load(std::memory_order_acquire); }

}  // namespace manypy

#include "interpreters/host_services.h"

#include <map>
#include <memory>
#include <shared_mutex>

#include "common/mutex.h"

namespace manypy {
namespace {

struct Registry {
  SharedMutex mu;
  std::map<std::string, std::shared_ptr<const HostService>> services GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static auto* registry = new Registry();  // never destroyed: interpreters may call late
  return *registry;
}

}  // namespace

void RegisterHostService(const std::string& service, HostService handler) {
  Registry& r = TheRegistry();
  WriterLock lock(r.mu);
  r.services[service] = std::make_shared<const HostService>(std::move(handler));
}

void UnregisterHostService(const std::string& service) {
  Registry& r = TheRegistry();
  WriterLock lock(r.mu);
  r.services.erase(service);
}

StatusOr<Value> CallHostService(const std::string& service, size_t interpreter, const Value& request) {
  std::shared_ptr<const HostService> handler;
  {
    Registry& r = TheRegistry();
    ReaderLock lock(r.mu);
    auto it = r.services.find(service);
    if (it != r.services.end()) handler = it->second;
  }
  // Called outside the lock: a handler may wait (a nested inference).
  if (handler == nullptr) return NotFound("the server offers no service '" + service + "' to Python");
  return (*handler)(interpreter, request);
}

}  // namespace manypy

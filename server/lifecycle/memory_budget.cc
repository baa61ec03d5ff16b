#include "server/lifecycle/memory_budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace manypy {
namespace {

std::string Describe(const std::vector<ResidentModel>& resident) {
  if (resident.empty()) return "nothing";
  std::vector<ResidentModel> sorted = resident;
  std::sort(sorted.begin(), sorted.end(),
            [](const ResidentModel& a, const ResidentModel& b) { return a.bytes > b.bytes; });
  std::string out;
  size_t shown = 0;
  for (const auto& r : sorted) {
    if (shown == 8) {
      out += ", and " + std::to_string(sorted.size() - shown) + " more";
      break;
    }
    if (shown++ > 0) out += ", ";
    out += r.name + " v" + std::to_string(r.version) + " " + FormatBytes(r.bytes);
    if (r.pinned) {
      out += " (pinned)";
    } else if (!r.evictable) {
      out += " (loading or draining)";
    } else if (!r.idle) {
      out += " (busy)";
    }
  }
  return out;
}

}  // namespace

EvictionPlan PlanLoad(const BudgetLimits& limits, const std::vector<ResidentModel>& resident,
                      const std::string& name, int64_t needed_bytes, bool may_evict,
                      bool adds_model) {
  EvictionPlan plan;
  if (!limits.enabled()) return plan;
  int64_t used = 0;
  for (const auto& r : resident) used += r.bytes;
  size_t count = resident.size();
  auto fits = [&] {
    bool memory_ok = limits.memory_bytes == 0 || used + needed_bytes <= limits.memory_bytes;
    bool count_ok = limits.max_models == 0 || count + (adds_model ? 1 : 0) <= limits.max_models;
    return memory_ok && count_ok;
  };
  if (fits()) return plan;
  if (may_evict) {
    std::vector<ResidentModel> candidates;
    for (const auto& r : resident) {
      if (r.idle && !r.pinned && r.evictable) candidates.push_back(r);
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const ResidentModel& a, const ResidentModel& b) { return a.last_used < b.last_used; });
    for (const auto& c : candidates) {
      if (fits()) break;
      plan.victims.push_back(c);
      used -= c.bytes;
      --count;
    }
    if (fits()) return plan;
    plan.victims.clear();  // evicting all of them would not be enough: evict none
  }
  std::string limit;
  if (limits.memory_bytes > 0) limit = "the model memory budget of " + FormatBytes(limits.memory_bytes);
  if (limits.max_models > 0) {
    limit += (limit.empty() ? "" : " and ");
    limit += "--max-loaded-models " + std::to_string(limits.max_models);
  }
  int64_t loaded = 0;
  for (const auto& r : resident) loaded += r.bytes;
  plan.refusal = Status(StatusCode::kResourceExhausted,
      "model '" + name + "' needs " + FormatBytes(needed_bytes) + " and does not fit in " + limit +
      ": " + std::to_string(resident.size()) + " model(s) hold " + FormatBytes(loaded) + " (" +
      Describe(resident) + ")" +
      (may_evict ? "; none of them can be evicted for it (pinned, busy, loading or draining)"
                 : "; only --model-control-mode=on-demand evicts models: unload one first"));
  return plan;
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(v) >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char text[48];
  if (unit == 0) {
    snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  } else {
    snprintf(text, sizeof(text), "%.1f %s", v, units[unit]);
  }
  return text;
}

StatusOr<int64_t> ParseBytes(const std::string& text) {
  const std::string bad = "'" + text + "' is not a size (a number with an optional unit: 512M, 2G, 1.5GiB)";
  if (text.empty()) return InvalidArgument(bad);
  char* end = nullptr;
  double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(number >= 0) || std::isinf(number)) return InvalidArgument(bad);
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  const std::string prefixes = "KMGT";
  if (!unit.empty() && prefixes.find(unit[0]) != std::string::npos) {
    scale = std::pow(1024.0, static_cast<double>(prefixes.find(unit[0]) + 1));
    unit.erase(0, 1);
    if (!unit.empty() && unit[0] == 'I') unit.erase(0, 1);
  }
  if (unit != "" && unit != "B") return InvalidArgument(bad);
  double bytes = number * scale;
  if (bytes > 9.0e18) return InvalidArgument(bad);
  return static_cast<int64_t>(bytes);
}

}  // namespace manypy

#include "package_format/openai_spec.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "package_format/manifest.h"

namespace manypy {
namespace {

// One field of the convention: the datatypes and rank (without the batch
// dimension) its tensor must have, and the route that cannot do without it.
struct FieldRule {
  const char* field;
  std::vector<std::string> datatypes;
  size_t rank;
  const char* required_by;  ///< a route, or nullptr
};

const std::vector<FieldRule>& InputRules() {
  static const std::vector<FieldRule> rules = {
      {"prompt", {"BYTES"}, 1, kCompletionsRoute},
      {"messages", {"BYTES"}, 1, kChatRoute},
      {"input", {"BYTES"}, 1, kEmbeddingsRoute},
      {"max_tokens", {"INT32", "INT64"}, 1, nullptr},
      {"temperature", {"FP32", "FP64"}, 1, nullptr},
      {"top_p", {"FP32", "FP64"}, 1, nullptr},
      {"stop", {"BYTES"}, 1, nullptr},
      {"seed", {"INT64"}, 1, nullptr},
  };
  return rules;
}

const std::vector<FieldRule>& OutputRules() {
  static const std::vector<FieldRule> rules = {
      {"text", {"BYTES"}, 1, nullptr},  // required by two routes: see Required below
      {"finish_reason", {"BYTES"}, 1, nullptr},
      {"completion_tokens", {"INT32", "INT64"}, 1, nullptr},
      {"prompt_tokens", {"INT32", "INT64"}, 1, nullptr},
      {"embedding", {"FP16", "FP32", "FP64"}, 2, kEmbeddingsRoute},
  };
  return rules;
}

// Whether `route` needs `field` mapped.
bool Required(const FieldRule& rule, const std::string& route) {
  if (std::string(rule.field) == "text") return route == kCompletionsRoute || route == kChatRoute;
  return rule.required_by != nullptr && route == rule.required_by;
}

std::string Join(const std::vector<std::string>& items, const char* last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? std::string(" ") + last + " " : ", ") + items[i];
  }
  return out;
}

// The problem with one side's map (`kind` "input" or "output"), or {"", ""}.
std::pair<std::string, std::string> SideProblem(
    const std::vector<std::string>& routes, const char* kind, const char* key,
    const std::vector<FieldRule>& rules,
    const std::vector<std::pair<std::string, std::string>>& map,
    const std::vector<TensorSpec>& tensors) {
  std::set<std::string> used;
  for (const auto& entry : map) {
    // Named copies: a lambda below cannot capture a structured binding in C++17.
    const std::string& field = entry.first;
    const std::string& tensor = entry.second;
    const std::string path = std::string(key) + "." + field;
    auto rule = std::find_if(rules.begin(), rules.end(),
                             [&](const FieldRule& r) { return field == r.field; });
    if (rule == rules.end()) {
      std::vector<std::string> names;
      for (const FieldRule& r : rules) names.push_back(r.field);
      return {path, "unknown field (expected one of " + Join(names, "or") + ")"};
    }
    // The route named in a problem: the first declared that needs the field, else the first.
    std::string route = routes.empty() ? "" : routes[0];
    for (const std::string& r : routes) {
      if (Required(*rule, r)) {
        route = r;
        break;
      }
    }
    auto spec = std::find_if(tensors.begin(), tensors.end(),
                             [&](const TensorSpec& t) { return t.name == tensor; });
    if (spec == tensors.end()) {
      std::vector<std::string> names;
      for (const TensorSpec& t : tensors) names.push_back(t.name);
      return {path, "route '" + route + "': '" + tensor + "' is not an " + kind +
                        " of the model (its " + kind + "s: " + Join(names, "and") + ")"};
    }
    if (!used.insert(tensor).second) {
      return {path, "route '" + route + "': " + kind + " '" + tensor + "' is mapped twice"};
    }
    if (std::find(rule->datatypes.begin(), rule->datatypes.end(), spec->datatype) ==
        rule->datatypes.end()) {
      return {path, "route '" + route + "': " + kind + " '" + tensor + "' is " + spec->datatype +
                        ", expected " + Join(rule->datatypes, "or")};
    }
    if (spec->shape.size() != rule->rank) {
      return {path, "route '" + route + "': " + kind + " '" + tensor + "' has " +
                        std::to_string(spec->shape.size()) + " dimensions, expected " +
                        std::to_string(rule->rank) + " (without the batch dimension)"};
    }
  }
  for (const std::string& route : routes) {
    for (const FieldRule& rule : rules) {
      if (Required(rule, route) && OpenAiSpec::Mapped(map, rule.field).empty()) {
        return {std::string(key) + "." + rule.field,
                "route '" + route + "' needs the " + kind + " '" + rule.field + "' mapped"};
      }
    }
  }
  return {"", ""};
}

}  // namespace

bool OpenAiSpec::Serves(const std::string& route) const {
  return std::find(routes.begin(), routes.end(), route) != routes.end();
}

const std::string& OpenAiSpec::Mapped(const std::vector<std::pair<std::string, std::string>>& map,
                                      const std::string& field) {
  static const std::string kNone;
  for (const auto& [f, tensor] : map) {
    if (f == field) return tensor;
  }
  return kNone;
}

bool OpenAiSpec::operator==(const OpenAiSpec& o) const {
  return std::tie(routes, inputs, outputs) == std::tie(o.routes, o.inputs, o.outputs);
}

std::pair<std::string, std::string> OpenAiProblem(const OpenAiSpec& spec,
                                                  const std::vector<TensorSpec>& inputs,
                                                  const std::vector<TensorSpec>& outputs) {
  const std::vector<std::string> known = {kCompletionsRoute, kChatRoute, kEmbeddingsRoute};
  if (spec.routes.empty()) return {"routes", "must name at least one route"};
  std::set<std::string> seen;
  for (size_t i = 0; i < spec.routes.size(); ++i) {
    const std::string& route = spec.routes[i];
    const std::string path = "routes[" + std::to_string(i) + "]";
    if (std::find(known.begin(), known.end(), route) == known.end()) {
      return {path, "unknown route '" + route + "' (expected " + Join(known, "or") + ")"};
    }
    if (!seen.insert(route).second) return {path, "route '" + route + "' is listed twice"};
  }
  auto problem = SideProblem(spec.routes, "input", "inputs", InputRules(), spec.inputs, inputs);
  if (!problem.first.empty()) return problem;
  problem = SideProblem(spec.routes, "output", "outputs", OutputRules(), spec.outputs, outputs);
  if (!problem.first.empty()) return problem;
  // The server fills every input on each call: one left unmapped could not be.
  for (const TensorSpec& t : inputs) {
    bool mapped = std::any_of(spec.inputs.begin(), spec.inputs.end(),
                              [&](const auto& m) { return m.second == t.name; });
    if (!mapped) {
      return {"inputs", "route '" + spec.routes[0] + "': the model's input '" + t.name +
                            "' is mapped to no request field"};
    }
  }
  return {"", ""};
}

}  // namespace manypy

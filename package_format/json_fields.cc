#include "package_format/json_fields.h"

#include <algorithm>
#include <memory>
#include <set>

#include "common/json_limits.h"

namespace manypy {
namespace {

using json = nlohmann::json;

// Thrown from the parse callback at the first container past kMaxJsonDepth,
// so nlohmann stops there instead of building the rest.
struct NestedTooDeep {};

// Tracks the keys of every open object while nlohmann parses; remembers the
// first repeat, and stops the parse at a container nested past the limit.
class DuplicateKeyFinder {
 public:
  explicit DuplicateKeyFinder(std::string* duplicate) : duplicate_(duplicate) {}
  bool operator()(int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      if (++*depth_ > kMaxJsonDepth) throw NestedTooDeep{};
    }
    if (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end) --*depth_;
    if (event == json::parse_event_t::object_start) keys_->emplace_back();
    if (event == json::parse_event_t::object_end && !keys_->empty()) keys_->pop_back();
    if (event == json::parse_event_t::key && !keys_->empty() &&
        !keys_->back().insert(parsed.get<std::string>()).second && duplicate_->empty())
      *duplicate_ = parsed.get<std::string>();
    return true;
  }

 private:
  // Shared: nlohmann copies the callback.
  std::shared_ptr<std::vector<std::set<std::string>>> keys_ =
      std::make_shared<std::vector<std::set<std::string>>>();
  std::shared_ptr<int> depth_ = std::make_shared<int>(0);
  std::string* duplicate_;
};

}  // namespace

StatusOr<json> JsonFields::ParseObject(const std::string& text, const std::string& what) {
  std::string duplicate;
  json doc;
  try {
    doc = json::parse(text, DuplicateKeyFinder(&duplicate));
  } catch (const json::exception& e) {
    return InvalidArgument(what + " is not valid JSON: " + e.what());
  } catch (const NestedTooDeep&) {
    return InvalidArgument(what + " is not valid JSON: nested deeper than the limit of " +
                           std::to_string(kMaxJsonDepth) + " levels of arrays and objects");
  }
  if (!duplicate.empty()) return InvalidArgument(what + " has the key '" + duplicate + "' twice");
  if (!doc.is_object())
    return InvalidArgument(what + " must be a JSON object, not " + TypeName(doc));
  return doc;
}

const char* JsonFields::TypeName(const json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_object()) return "an object";
  if (j.is_array()) return "a list";
  return "null";
}

Status JsonFields::Error(const std::string& key, const std::string& problem) const {
  return InvalidArgument(archive_ + ": manifest field '" + prefix_ + key + "': " + problem);
}

Status JsonFields::WrongType(const std::string& key, const char* expected) const {
  return Error(key, std::string("expected ") + expected + ", got " + TypeName(obj_.at(key)));
}

Status JsonFields::Only(const std::vector<std::string>& allowed) const {
  for (const auto& item : obj_.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return Error(item.key(), "unknown field (expected one of " + list + ")");
  }
  return Status::Ok();
}

StatusOr<const json*> JsonFields::Get(const std::string& key, bool required) const {
  auto it = obj_.find(key);
  if (it != obj_.end()) return &*it;
  if (required) return Error(key, "required field missing");
  return static_cast<const json*>(nullptr);
}

Status JsonFields::Int(const std::string& key, bool required, int64_t* out) const {
  StatusOr<const json*> j = Get(key, required);
  if (!j.ok() || *j == nullptr) return j.status();
  if (!(*j)->is_number_integer()) return WrongType(key, "an integer");
  if ((*j)->is_number_unsigned() && (*j)->get<uint64_t>() > INT64_MAX)
    return Error(key, "integer out of range");
  *out = (*j)->get<int64_t>();
  return Status::Ok();
}

Status JsonFields::String(const std::string& key, bool required, std::string* out) const {
  StatusOr<const json*> j = Get(key, required);
  if (!j.ok() || *j == nullptr) return j.status();
  if (!(*j)->is_string()) return WrongType(key, "a string");
  *out = (*j)->get<std::string>();
  return Status::Ok();
}

Status JsonFields::Bool(const std::string& key, bool* out) const {
  StatusOr<const json*> j = Get(key, false);
  if (!j.ok() || *j == nullptr) return j.status();
  if (!(*j)->is_boolean()) return WrongType(key, "a boolean");
  *out = (*j)->get<bool>();
  return Status::Ok();
}

StatusOr<const json*> JsonFields::Object(const std::string& key, bool required) const {
  StatusOr<const json*> j = Get(key, required);
  if (j.ok() && *j != nullptr && !(*j)->is_object()) return WrongType(key, "an object");
  return j;
}

StatusOr<const json*> JsonFields::List(const std::string& key, bool required) const {
  StatusOr<const json*> j = Get(key, required);
  if (j.ok() && *j != nullptr && !(*j)->is_array()) return WrongType(key, "a list");
  return j;
}

}  // namespace manypy

// JsonFields: typed, validated reads of one JSON object's fields whose errors name the archive
// and the field path (used by the manifest parser). Holds references to its inputs; a
// short-lived helper for one thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

class JsonFields {
 public:
  /// Parses `text` as a JSON object, refusing invalid JSON and duplicate keys (nlohmann keeps
  /// the last one silently; a duplicate is as likely a mistake as a typo). `what` names the
  /// document in errors, e.g. "model.mpk: manifest".
  static StatusOr<nlohmann::json> ParseObject(const std::string& text, const std::string& what);

  /// `obj` must be an object; `prefix` is its path ("" at top level, "inputs[1]." nested).
  JsonFields(const std::string& archive, const nlohmann::json& obj, std::string prefix)
      : archive_(archive), obj_(obj), prefix_(std::move(prefix)) {}

  /// "<archive>: manifest field '<prefix><key>': <problem>".
  Status Error(const std::string& key, const std::string& problem) const;
  /// Refuses a key not in `allowed`.
  Status Only(const std::vector<std::string>& allowed) const;
  bool Has(const std::string& key) const { return obj_.contains(key); }
  std::string Path(const std::string& key) const { return prefix_ + key; }
  const std::string& archive() const { return archive_; }

  // Each leaves *out untouched when the key is absent and not required.
  Status Int(const std::string& key, bool required, int64_t* out) const;
  Status String(const std::string& key, bool required, std::string* out) const;
  Status Bool(const std::string& key, bool* out) const;
  /// The object (or list) under `key`, nullptr when absent and not required.
  StatusOr<const nlohmann::json*> Object(const std::string& key, bool required) const;
  StatusOr<const nlohmann::json*> List(const std::string& key, bool required) const;

  /// "an integer", "a string", ... for messages.
  static const char* TypeName(const nlohmann::json& j);

 private:
  StatusOr<const nlohmann::json*> Get(const std::string& key, bool required) const;
  Status WrongType(const std::string& key, const char* expected) const;

  const std::string& archive_;
  const nlohmann::json& obj_;
  std::string prefix_;
};

}  // namespace manypy

// InferResult: the outputs of one inference, by name, as raw bytes with
// typed accessors. An immutable value once built; safe to read from any thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "clients/cpp/infer_input.h"
#include "common/status.h"

namespace inference {
class ModelInferResponse;
}

namespace manypy::client {

/// One output tensor: raw little-endian bytes (BYTES: length-prefixed).
struct InferOutput {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  std::string raw;
};

class InferResult {
 public:
  /// Builds from a response; typed contents are converted to raw bytes.
  static StatusOr<InferResult> FromResponse(inference::ModelInferResponse&& response);

  const std::string& model_name() const { return model_name_; }
  const std::string& model_version() const { return model_version_; }
  const std::string& id() const { return id_; }
  /// Output names in the order the server sent them.
  const std::vector<std::string>& output_names() const { return names_; }
  bool Has(const std::string& name) const { return outputs_.count(name) != 0; }
  /// NotFound if the response has no output `name`.
  StatusOr<InferOutput> Output(const std::string& name) const;

  /// The elements of output `name` as T; InvalidArgument if its datatype is not T's.
  template <typename T>
  StatusOr<std::vector<T>> As(const std::string& name) const {
    auto it = outputs_.find(name);
    if (it == outputs_.end()) return NotFound("no output named '" + name + "'");
    const InferOutput& o = it->second;
    if (o.datatype != DatatypeOf<T>()) {
      return InvalidArgument("output '" + name + "' is " + o.datatype + ", not " + DatatypeOf<T>());
    }
    std::vector<T> values(o.raw.size() / sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) values[i] = o.raw[i] != 0;
    } else {
      memcpy(values.data(), o.raw.data(), values.size() * sizeof(T));
    }
    return values;
  }
  StatusOr<std::vector<float>> AsFloat(const std::string& name) const { return As<float>(name); }
  StatusOr<std::vector<double>> AsDouble(const std::string& name) const { return As<double>(name); }
  StatusOr<std::vector<int32_t>> AsInt32(const std::string& name) const { return As<int32_t>(name); }
  StatusOr<std::vector<int64_t>> AsInt64(const std::string& name) const { return As<int64_t>(name); }
  /// The elements of a BYTES output.
  StatusOr<std::vector<std::string>> AsStrings(const std::string& name) const;

 private:
  std::string model_name_, model_version_, id_;
  std::vector<std::string> names_;
  std::map<std::string, InferOutput> outputs_;
};

}  // namespace manypy::client

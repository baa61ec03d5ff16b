// Value: a Python-free description of the data that crosses the interpreter
// boundary (None, bool, int, float, str, bytes, tensor, list, tuple, dict).
// A plain value type: immutable once built, safe to share between threads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace manypy {

class Value {
 public:
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kTensor, kList, kTuple, kDict };
  using Items = std::vector<Value>;
  using DictItems = std::vector<std::pair<Value, Value>>;

  Value() = default;  ///< None
  Value(bool b) : kind_(Kind::kBool), int_(b) {}              // NOLINT: implicit by design
  Value(int i) : kind_(Kind::kInt), int_(i) {}                // NOLINT
  Value(int64_t i) : kind_(Kind::kInt), int_(i) {}            // NOLINT
  Value(double d) : kind_(Kind::kFloat), float_(d) {}         // NOLINT
  Value(const char* s) : kind_(Kind::kStr), str_(s) {}        // NOLINT
  Value(std::string s) : kind_(Kind::kStr), str_(std::move(s)) {}  // NOLINT
  Value(at::Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT

  /// A tensor the host lends to one call in one interpreter (a request's
  /// input viewing memory the host will take back, e.g. a client's shared
  /// memory): there the Python tensor shares this tensor's storage object
  /// instead of getting one of its own (PyTorch 2.x gives each interpreter
  /// its own), so what the host later does to that storage (a private copy
  /// of its bytes: SharedMemoryViews) reaches any alias the model kept.
  /// Never lend one tensor to two interpreters: a storage belongs to the
  /// first interpreter that wraps it.
  static Value LentTensor(at::Tensor t);

  static Value None() { return Value(); }
  static Value Bytes(std::string data);
  static Value List(Items items);
  static Value Tuple(Items items);
  static Value Dict(DictItems items);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }

  // Accessors throw std::invalid_argument naming the actual kind on a mismatch.
  bool to_bool() const;
  int64_t to_int() const;
  double to_double() const;  ///< accepts int too
  const std::string& to_str() const;
  const std::string& to_bytes() const;
  const at::Tensor& to_tensor() const;
  /// A tensor made by LentTensor.
  bool lent() const { return lent_; }
  const Items& items() const;  ///< list or tuple
  const DictItems& dict_items() const;
  /// The value under a str key of a dict, or nullptr.
  const Value* Find(const std::string& key) const;

  /// A short human-readable rendering, e.g. for error messages and logs.
  std::string DebugString() const;

 private:
  void Expect(Kind k) const;

  Kind kind_ = Kind::kNone;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;  // str or bytes
  at::Tensor tensor_;
  bool lent_ = false;  // a tensor made by LentTensor
  Items items_;
  DictItems dict_;
};

const char* KindName(Value::Kind kind);

}  // namespace manypy

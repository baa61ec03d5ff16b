#include "interpreters/value.h"

#include <sstream>
#include <stdexcept>

namespace manypy {

const char* KindName(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kStr: return "str";
    case Value::Kind::kBytes: return "bytes";
    case Value::Kind::kTensor: return "Tensor";
    case Value::Kind::kList: return "list";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kDict: return "dict";
  }
  return "?";
}

Value Value::Bytes(std::string data) {
  Value v(std::move(data));
  v.kind_ = Kind::kBytes;
  return v;
}

Value Value::LentTensor(at::Tensor t) {
  Value v(std::move(t));
  v.lent_ = true;
  return v;
}

Value Value::List(Items items) {
  Value v;
  v.kind_ = Kind::kList;
  v.items_ = std::move(items);
  return v;
}

Value Value::Tuple(Items items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::Dict(DictItems items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::move(items);
  return v;
}

void Value::Expect(Kind k) const {
  if (kind_ != k) {
    throw std::invalid_argument(std::string("expected a ") + KindName(k) + " value, got " +
                                KindName(kind_));
  }
}

bool Value::to_bool() const { return Expect(Kind::kBool), int_ != 0; }
int64_t Value::to_int() const { return Expect(Kind::kInt), int_; }
double Value::to_double() const {
  if (kind_ == Kind::kInt) return static_cast<double>(int_);
  return Expect(Kind::kFloat), float_;
}
const std::string& Value::to_str() const { return Expect(Kind::kStr), str_; }
const std::string& Value::to_bytes() const { return Expect(Kind::kBytes), str_; }
const at::Tensor& Value::to_tensor() const { return Expect(Kind::kTensor), tensor_; }
const Value::Items& Value::items() const {
  if (kind_ != Kind::kTuple) Expect(Kind::kList);
  return items_;
}
const Value::DictItems& Value::dict_items() const { return Expect(Kind::kDict), dict_; }

const Value* Value::Find(const std::string& key) const {
  for (const auto& [k, v] : dict_items()) {
    if (k.kind() == Kind::kStr && k.to_str() == key) return &v;
  }
  return nullptr;
}

std::string Value::DebugString() const {
  std::ostringstream out;
  switch (kind_) {
    case Kind::kNone: out << "None"; break;
    case Kind::kBool: out << (int_ ? "True" : "False"); break;
    case Kind::kInt: out << int_; break;
    case Kind::kFloat: out << float_; break;
    case Kind::kStr: out << '\'' << str_ << '\''; break;
    case Kind::kBytes: out << "b<" << str_.size() << " bytes>"; break;
    case Kind::kTensor:
      out << "Tensor(" << tensor_.sizes() << ", " << tensor_.dtype() << ")";
      break;
    case Kind::kList:
    case Kind::kTuple: {
      out << (kind_ == Kind::kList ? '[' : '(');
      for (size_t i = 0; i < items_.size(); ++i) out << (i ? ", " : "") << items_[i].DebugString();
      out << (kind_ == Kind::kList ? ']' : ')');
      break;
    }
    case Kind::kDict: {
      out << '{';
      for (size_t i = 0; i < dict_.size(); ++i) {
        out << (i ? ", " : "") << dict_[i].first.DebugString() << ": "
            << dict_[i].second.DebugString();
      }
      out << '}';
      break;
    }
  }
  return out.str();
}

}  // namespace manypy

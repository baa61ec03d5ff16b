#include "server/http/tensor_json.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstring>
#include <limits>

namespace manypy {
namespace {

template <typename T>
void Append(T v, std::string* raw) {
  raw->append(reinterpret_cast<const char*>(&v), sizeof(T));  // little-endian hosts only
}

template <typename T>
Status PackInt(const rapidjson::Value& v, std::string* raw) {
  if constexpr (std::is_signed_v<T>) {
    if (!v.IsInt64()) return InvalidArgument("an integer");
    int64_t x = v.GetInt64();
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
      return InvalidArgument("an integer in range");
    }
    Append(static_cast<T>(x), raw);
  } else {
    if (!v.IsUint64()) return InvalidArgument("a non-negative integer");
    uint64_t x = v.GetUint64();
    if (x > std::numeric_limits<T>::max()) return InvalidArgument("an integer in range");
    Append(static_cast<T>(x), raw);
  }
  return Status::Ok();
}

// One leaf; on failure the status message says what the leaf should have been.
Status PackOne(const DatatypeInfo& dt, const rapidjson::Value& v, std::string* raw) {
  switch (dt.type) {
    case Datatype::kBool:
      if (!v.IsBool()) return InvalidArgument("true or false");
      Append<uint8_t>(v.GetBool() ? 1 : 0, raw);
      return Status::Ok();
    case Datatype::kUint8: return PackInt<uint8_t>(v, raw);
    case Datatype::kUint16: return PackInt<uint16_t>(v, raw);
    case Datatype::kUint32: return PackInt<uint32_t>(v, raw);
    case Datatype::kUint64: return PackInt<uint64_t>(v, raw);
    case Datatype::kInt8: return PackInt<int8_t>(v, raw);
    case Datatype::kInt16: return PackInt<int16_t>(v, raw);
    case Datatype::kInt32: return PackInt<int32_t>(v, raw);
    case Datatype::kInt64: return PackInt<int64_t>(v, raw);
    case Datatype::kFp16:
    case Datatype::kBf16:
    case Datatype::kFp32:
    case Datatype::kFp64: {
      if (!v.IsNumber()) return InvalidArgument("a number");
      double x = v.GetDouble();
      if (dt.type == Datatype::kFp64) Append(x, raw);
      else if (dt.type == Datatype::kFp32) Append(static_cast<float>(x), raw);
      else if (dt.type == Datatype::kFp16) Append(c10::Half(static_cast<float>(x)).x, raw);
      else Append(c10::BFloat16(static_cast<float>(x)).x, raw);
      return Status::Ok();
    }
    case Datatype::kBytes: {
      if (!v.IsString()) return InvalidArgument("a string");
      Append<uint32_t>(v.GetStringLength(), raw);
      raw->append(v.GetString(), v.GetStringLength());
      return Status::Ok();
    }
  }
  return InvalidArgument("a known datatype");
}

Status PackTree(const std::string& what, const DatatypeInfo& dt, const rapidjson::Value& v,
                std::string* raw, size_t* count, int depth) {
  if (v.IsArray()) {
    if (depth > 32) return InvalidArgument(what + ": 'data' is nested too deeply");
    for (const auto& item : v.GetArray()) {
      MANYPY_RETURN_IF_ERROR(PackTree(what, dt, item, raw, count, depth + 1));
    }
    return Status::Ok();
  }
  Status s = PackOne(dt, v, raw);
  if (!s.ok()) {
    return InvalidArgument(what + " element " + std::to_string(*count) + ": " + dt.name +
                           " data must be " + s.message());
  }
  ++*count;
  return Status::Ok();
}

template <typename T>
T Load(const char* p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Status JsonToRaw(const std::string& what, const DatatypeInfo& dt, const rapidjson::Value& data,
                 std::string* raw, size_t* count) {
  raw->clear();
  *count = 0;
  if (dt.wire_size > 0 && data.IsArray()) raw->reserve(data.Size() * dt.wire_size);
  return PackTree(what, dt, data, raw, count, 0);
}

Status RawToJson(const DatatypeInfo& dt, const std::string& raw, rapidjson::Value* out,
                 rapidjson::Document::AllocatorType& alloc) {
  const char* p = raw.data();
  const char* end = p + raw.size();
  if (dt.type == Datatype::kBytes) {
    while (p < end) {
      if (end - p < 4) return Internal("truncated BYTES output");
      uint32_t n = Load<uint32_t>(p);
      p += 4;
      if (static_cast<size_t>(end - p) < n) return Internal("BYTES output overruns its data");
      out->PushBack(rapidjson::Value(p, n, alloc), alloc);
      p += n;
    }
    return Status::Ok();
  }
  if (raw.size() % dt.wire_size != 0) return Internal("output is not whole elements");
  for (; p < end; p += dt.wire_size) {
    rapidjson::Value v;
    switch (dt.type) {
      case Datatype::kBool: v.SetBool(*p != 0); break;
      case Datatype::kUint8: v.SetUint(Load<uint8_t>(p)); break;
      case Datatype::kUint16: v.SetUint(Load<uint16_t>(p)); break;
      case Datatype::kUint32: v.SetUint(Load<uint32_t>(p)); break;
      case Datatype::kUint64: v.SetUint64(Load<uint64_t>(p)); break;
      case Datatype::kInt8: v.SetInt(Load<int8_t>(p)); break;
      case Datatype::kInt16: v.SetInt(Load<int16_t>(p)); break;
      case Datatype::kInt32: v.SetInt(Load<int32_t>(p)); break;
      case Datatype::kInt64: v.SetInt64(Load<int64_t>(p)); break;
      case Datatype::kFp16:
        v.SetDouble(static_cast<float>(c10::Half(Load<uint16_t>(p), c10::Half::from_bits())));
        break;
      case Datatype::kBf16:
        v.SetDouble(static_cast<float>(c10::BFloat16(Load<uint16_t>(p), c10::BFloat16::from_bits())));
        break;
      case Datatype::kFp32: v.SetDouble(Load<float>(p)); break;
      case Datatype::kFp64: v.SetDouble(Load<double>(p)); break;
      case Datatype::kBytes: break;
    }
    out->PushBack(v, alloc);
  }
  return Status::Ok();
}

}  // namespace manypy

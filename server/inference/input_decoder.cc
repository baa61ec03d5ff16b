#include "server/inference/input_decoder.h"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>
#include <map>

#include "common/datatype.h"
#include "server/inference/datatypes.h"
#include "server/inference/shared_memory_refs.h"
#include "server/inference/shape_check.h"

namespace manypy {
namespace {

using inference::InferTensorContents;

// The most lists an empty BYTES input may nest into (see DecodeBytes).
constexpr int64_t kMaxEmptyBytesLists = int64_t{1} << 16;

template <typename Wire, typename Source>
Status PackValues(const std::string& what, const Source& values, std::string* raw) {
  raw->resize(values.size() * sizeof(Wire));
  for (int i = 0; i < values.size(); ++i) {
    auto v = values.Get(i);
    if constexpr (std::is_integral_v<Wire> && !std::is_same_v<Wire, bool>) {
      if (v < static_cast<decltype(v)>(std::numeric_limits<Wire>::min()) ||
          (v > 0 && static_cast<uint64_t>(v) > std::numeric_limits<Wire>::max())) {
        return InvalidArgument(what + " element " + std::to_string(i) + " (" + std::to_string(v) +
                               ") is out of range for its datatype");
      }
    }
    Wire w = static_cast<Wire>(v);
    memcpy(raw->data() + i * sizeof(Wire), &w, sizeof(Wire));
  }
  return Status::Ok();
}

// Typed contents -> the raw little-endian wire form, so one path decodes both. INT8/16/32
// share int_contents (UINT8/16/32 uint_contents): the wire size picks the width.
Status TypedToRaw(const std::string& what, const DatatypeInfo& dt, const InferTensorContents& c,
                  std::string* raw) {
  switch (dt.typed_field) {
    case TypedField::kBool: return PackValues<bool>(what, c.bool_contents(), raw);
    case TypedField::kInt:
      if (dt.wire_size == 1) return PackValues<int8_t>(what, c.int_contents(), raw);
      if (dt.wire_size == 2) return PackValues<int16_t>(what, c.int_contents(), raw);
      return PackValues<int32_t>(what, c.int_contents(), raw);
    case TypedField::kInt64: return PackValues<int64_t>(what, c.int64_contents(), raw);
    case TypedField::kUint:
      if (dt.wire_size == 1) return PackValues<uint8_t>(what, c.uint_contents(), raw);
      if (dt.wire_size == 2) return PackValues<uint16_t>(what, c.uint_contents(), raw);
      return PackValues<uint32_t>(what, c.uint_contents(), raw);
    case TypedField::kUint64: return PackValues<uint64_t>(what, c.uint64_contents(), raw);
    case TypedField::kFp32: return PackValues<float>(what, c.fp32_contents(), raw);
    case TypedField::kFp64: return PackValues<double>(what, c.fp64_contents(), raw);
    case TypedField::kBytes:  // decoded by DecodeBytes, never here
    case TypedField::kNone: break;
  }
  return InvalidArgument(what + " has datatype " + dt.name +
                         ", which has no typed contents field: send it in raw_input_contents");
}

// Unsigned wire integers widen into the signed torch type chosen for them.
template <typename Wire, typename Torch>
Status WidenUnsigned(const std::string& what, const std::string& raw, at::Tensor* t) {
  auto* out = t->data_ptr<Torch>();
  for (int64_t i = 0; i < t->numel(); ++i) {
    Wire w;
    memcpy(&w, raw.data() + i * sizeof(Wire), sizeof(Wire));
    if (static_cast<uint64_t>(w) > static_cast<uint64_t>(std::numeric_limits<Torch>::max())) {
      return InvalidArgument(what + " element " + std::to_string(i) + " does not fit in int64");
    }
    out[i] = static_cast<Torch>(w);
  }
  return Status::Ok();
}

Status RawToTensor(const std::string& what, const DatatypeInfo& dt, const std::string& raw,
                   const std::vector<int64_t>& shape, int64_t numel, Value* out) {
  size_t element = dt.wire_size;
  // Divided, not multiplied: numel * element can wrap to match a short buffer.
  if (raw.size() % element != 0 || raw.size() / element != static_cast<size_t>(numel)) {
    return InvalidArgument(what + " has " + std::to_string(raw.size()) + " bytes of data, shape " +
                           ShapeString(shape) + " of " + dt.name + " needs " +
                           std::to_string(numel * element));
  }
  c10::ScalarType type;
  TorchTypeFor(dt.type, &type);
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  Status s;
  if (dt.type == Datatype::kUint16) s = WidenUnsigned<uint16_t, int32_t>(what, raw, &t);
  else if (dt.type == Datatype::kUint32) s = WidenUnsigned<uint32_t, int64_t>(what, raw, &t);
  else if (dt.type == Datatype::kUint64) s = WidenUnsigned<uint64_t, int64_t>(what, raw, &t);
  else if (!raw.empty()) memcpy(t.data_ptr(), raw.data(), raw.size());
  if (dt.type == Datatype::kBool) t = t.ne(0);  // any non-zero byte is true
  *out = Value(t);
  return s;
}

// An input in shared memory as a tensor viewing the region: for datatypes
// whose wire form is torch's own (not BOOL, which is normalized, nor the
// unsigned types widened into signed ones) at an address aligned for the
// element. Null otherwise (the caller copies, as for raw contents).
bool ViewOfRegion(const DatatypeInfo& dt, const SharedMemoryRef& ref,
                  const std::vector<int64_t>& shape, Value* out, SharedMemoryViews* views) {
  if (dt.type == Datatype::kBool || dt.type == Datatype::kBytes || WidenedInTorch(dt.type)) return false;
  if (reinterpret_cast<uintptr_t>(ref.data()) % dt.wire_size != 0) return false;
  c10::ScalarType type;
  TorchTypeFor(dt.type, &type);
  // The deleter holds the region mapped for as long as any tensor uses it.
  std::shared_ptr<const SharedMemoryRegion> hold = ref.region;
  at::Tensor t = at::from_blob(
      ref.data(), shape, [hold](void*) mutable { hold.reset(); },
      at::TensorOptions().dtype(type));
  views->Add(t);
  *out = Value::LentTensor(t);  // its storage is the one SharedMemoryViews re-points
  return true;
}

// Nested lists of bytes following `shape` (a BYTES tensor as the model sees it).
Value NestBytes(const std::vector<std::string>& items, const std::vector<int64_t>& shape,
                size_t dim, size_t* next) {
  if (dim == shape.size()) return Value::Bytes(items[(*next)++]);
  Value::Items level;
  for (int64_t i = 0; i < shape[dim]; ++i) level.push_back(NestBytes(items, shape, dim + 1, next));
  return Value::List(std::move(level));
}

Status DecodeBytes(const std::string& what, const inference::InferTensorContents* typed,
                   const std::string* raw, const std::vector<int64_t>& shape, int64_t numel,
                   Value* out) {
  std::vector<std::string> items;
  if (raw != nullptr) {  // each element: 4-byte little-endian length, then the bytes
    for (size_t pos = 0; pos < raw->size();) {
      uint32_t n;
      if (raw->size() - pos < 4) return InvalidArgument(what + ": truncated BYTES length prefix");
      memcpy(&n, raw->data() + pos, 4);
      pos += 4;
      if (raw->size() - pos < n) return InvalidArgument(what + ": BYTES element overruns the data");
      items.emplace_back(raw->data() + pos, n);
      pos += n;
    }
  } else {
    items.assign(typed->bytes_contents().begin(), typed->bytes_contents().end());
  }
  if (static_cast<int64_t>(items.size()) != numel) {
    return InvalidArgument(what + " has " + std::to_string(items.size()) +
                           " BYTES elements, shape " + ShapeString(shape) + " needs " +
                           std::to_string(numel));
  }
  // An empty BYTES tensor is still nested lists down to its first zero dimension: bound
  // them, or shape [1000000000000, 0] with no data asks for 10^12 lists (fuzz/infer_request/regressions/).
  if (numel == 0) {
    int64_t lists = 1;
    for (int64_t d : shape) {
      if (d == 0) break;
      if (lists > kMaxEmptyBytesLists / d) {
        return InvalidArgument(what + " has shape " + ShapeString(shape) +
                               ": an empty BYTES tensor may have at most " +
                               std::to_string(kMaxEmptyBytesLists) +
                               " rows before its zero dimension");
      }
      lists *= d;
    }
  }
  size_t next = 0;
  *out = NestBytes(items, shape, 0, &next);
  return Status::Ok();
}

}  // namespace

Status DecodeInputs(const inference::ModelInferRequest& request, const Manifest& m,
                    const SharedMemoryRegions* regions, std::vector<Value>* arguments,
                    SharedMemoryViews* views) {
  if (request.inputs_size() != static_cast<int>(m.inputs.size())) {
    std::string names;
    for (const auto& i : m.inputs) names += (names.empty() ? "" : ", ") + i.name;
    return InvalidArgument("model '" + m.name + "' expects " + std::to_string(m.inputs.size()) +
                           " input(s) (" + names + "), the request has " +
                           std::to_string(request.inputs_size()));
  }
  // raw_input_contents are those of the inputs not in shared memory, in order.
  std::vector<int> raw_index(request.inputs_size(), -1);
  int in_memory = 0;
  for (int i = 0; i < request.inputs_size(); ++i) {
    if (!NamesSharedMemory(request.inputs(i).parameters())) raw_index[i] = in_memory++;
  }
  bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != in_memory) {
    return InvalidArgument("the request has " + std::to_string(request.raw_input_contents_size()) +
                           " raw_input_contents for " + std::to_string(in_memory) +
                           " inputs not in shared memory; there must be one per such input");
  }
  std::map<std::string, int> by_name;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string& name = request.inputs(i).name();
    if (!by_name.emplace(name, i).second) {
      return InvalidArgument("input '" + name + "' appears twice in the request");
    }
    bool known = false;
    for (const auto& spec : m.inputs) known |= spec.name == name;
    if (!known) {
      std::string names;
      for (const auto& spec : m.inputs) names += (names.empty() ? "" : ", ") + spec.name;
      return InvalidArgument("model '" + m.name + "' has no input named '" + name +
                             "' (its inputs: " + names + ")");
    }
  }
  arguments->assign(m.inputs.size(), Value());
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const TensorSpec& spec = m.inputs[k];
    auto it = by_name.find(spec.name);  // present: counts match and every name is known
    const auto& input = request.inputs(it->second);
    std::string what = "input '" + spec.name + "'";
    if (input.datatype() != spec.datatype) {
      return InvalidArgument(what + " has datatype " + input.datatype() + ", model '" + m.name +
                             "' expects " + spec.datatype);
    }
    std::vector<int64_t> shape(input.shape().begin(), input.shape().end());
    int64_t numel;
    MANYPY_RETURN_IF_ERROR(CheckShape(what, shape, spec, m, &numel));
    const DatatypeInfo* dt = FindDatatype(spec.datatype);  // ParseManifest checked the name
    if (dt == nullptr) return Internal(what + ": unknown manifest datatype " + spec.datatype);
    std::string from_region;
    const std::string* raw_data = nullptr;
    if (raw_index[it->second] < 0) {
      if (input.has_contents()) {
        return InvalidArgument(what + " has contents although it is in shared memory");
      }
      auto ref = ResolveSharedMemory(input.parameters(), regions, what);
      if (!ref.ok()) return ref.status();
      if (dt->type != Datatype::kBytes &&
          ((*ref)->byte_size % dt->wire_size != 0 ||
           (*ref)->byte_size / dt->wire_size != static_cast<uint64_t>(numel))) {
        return InvalidArgument(what + " has shared_memory_byte_size " +
                               std::to_string((*ref)->byte_size) + ", shape " + ShapeString(shape) +
                               " of " + dt->name + " needs " + std::to_string(numel * dt->wire_size));
      }
      if (ViewOfRegion(*dt, **ref, shape, &(*arguments)[k], views)) continue;
      from_region.assign((*ref)->data(), (*ref)->byte_size);
      raw_data = &from_region;
    } else if (raw && input.has_contents()) {
      return InvalidArgument(what + " has typed contents although the request uses raw_input_contents");
    } else if (raw) {
      raw_data = &request.raw_input_contents(raw_index[it->second]);
    }
    if (dt->type == Datatype::kBytes) {
      MANYPY_RETURN_IF_ERROR(
          DecodeBytes(what, &input.contents(), raw_data, shape, numel, &(*arguments)[k]));
      continue;
    }
    std::string packed;
    if (raw_data == nullptr) MANYPY_RETURN_IF_ERROR(TypedToRaw(what, *dt, input.contents(), &packed));
    MANYPY_RETURN_IF_ERROR(RawToTensor(what, *dt, raw_data != nullptr ? *raw_data : packed, shape,
                                       numel, &(*arguments)[k]));
  }
  return Status::Ok();
}

}  // namespace manypy

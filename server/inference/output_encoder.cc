#include "server/inference/output_encoder.h"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>

#include "common/datatype.h"
#include "server/inference/datatypes.h"
#include "server/inference/shape_check.h"
#include "server/inference/shared_memory_refs.h"

namespace manypy {
namespace {

using inference::InferTensorContents;

// A model result that breaks its manifest is the model's fault: INTERNAL.
Status ModelFault(const Status& s) { return Internal("model output invalid: " + s.message()); }

bool IsList(const Value& v) { return v.kind() == Value::Kind::kList || v.kind() == Value::Kind::kTuple; }

// Flattens a BYTES output (nested lists of bytes or str) whose shape, taken
// from the first element at each depth, is `shape`; ragged nesting is an error.
Status FlattenBytes(const std::string& what, const Value& v, size_t dim,
                    const std::vector<int64_t>& shape, std::vector<std::string>* out) {
  if (dim == shape.size()) {
    if (v.kind() == Value::Kind::kBytes) out->push_back(v.to_bytes());
    else if (v.kind() == Value::Kind::kStr) out->push_back(v.to_str());
    else return Internal(what + ": BYTES elements must be bytes or str, got " + KindName(v.kind()));
    return Status::Ok();
  }
  if (!IsList(v) || static_cast<int64_t>(v.items().size()) != shape[dim]) {
    return Internal(what + ": BYTES output is not a regular nesting of lists");
  }
  for (const auto& item : v.items()) MANYPY_RETURN_IF_ERROR(FlattenBytes(what, item, dim + 1, shape, out));
  return Status::Ok();
}

std::vector<int64_t> BytesShape(const Value& v) {
  std::vector<int64_t> shape;
  for (const Value* p = &v; IsList(*p); p = &p->items()[0]) {
    shape.push_back(static_cast<int64_t>(p->items().size()));
    if (p->items().empty()) break;
  }
  return shape;
}

// An empty list carries no inner dimensions: an empty BYTES output (a batch of
// 0 rows, say) takes those after its zero dimension from the signature, each
// variable one 0, so that [] for an output [1] of a batching model is [0, 1].
void PadEmptyBytesShape(const TensorSpec& spec, const Manifest& m, std::vector<int64_t>* shape) {
  std::vector<int64_t> expected;
  if (m.max_batch_size > 0) expected.push_back(-1);
  expected.insert(expected.end(), spec.shape.begin(), spec.shape.end());
  if (shape->empty() || shape->back() != 0 || shape->size() >= expected.size()) return;
  for (size_t i = shape->size(); i < expected.size(); ++i) {
    shape->push_back(expected[i] < 0 ? 0 : expected[i]);
  }
}

template <typename Wire, typename Torch>
Status NarrowUnsigned(const std::string& what, const at::Tensor& t, std::string* raw) {
  at::Tensor src = t.to(c10::CppTypeToScalarType<Torch>::value);
  raw->resize(t.numel() * sizeof(Wire));
  const Torch* p = src.data_ptr<Torch>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] < 0 || static_cast<uint64_t>(p[i]) > std::numeric_limits<Wire>::max()) {
      return Internal(what + " element " + std::to_string(i) + " is out of range for its datatype");
    }
    Wire w = static_cast<Wire>(p[i]);
    memcpy(raw->data() + i * sizeof(Wire), &w, sizeof(Wire));
  }
  return Status::Ok();
}

// OK when `tensor` has the manifest's type `dt` (any integer type for the
// unsigned ones wider than a byte, which are narrowed with a range check).
Status CheckTensorType(const std::string& what, const DatatypeInfo& dt, const at::Tensor& tensor) {
  c10::ScalarType expected;
  TorchTypeFor(dt.type, &expected);
  if (tensor.scalar_type() != expected && !(WidenedInTorch(dt.type) && c10::isIntegralType(tensor.scalar_type(), false))) {
    return Internal(what + " is a " + std::string(c10::toString(tensor.scalar_type())) +
                    " tensor, the manifest declares " + dt.name);
  }
  return Status::Ok();
}

Status TensorToRaw(const std::string& what, const DatatypeInfo& dt, const at::Tensor& tensor,
                   std::string* raw) {
  MANYPY_RETURN_IF_ERROR(CheckTensorType(what, dt, tensor));
  at::Tensor t = tensor.contiguous();
  if (dt.type == Datatype::kUint16) return NarrowUnsigned<uint16_t, int64_t>(what, t, raw);
  if (dt.type == Datatype::kUint32) return NarrowUnsigned<uint32_t, int64_t>(what, t, raw);
  if (dt.type == Datatype::kUint64) return NarrowUnsigned<uint64_t, int64_t>(what, t, raw);
  raw->assign(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return Status::Ok();
}

// An output written into a client's shared-memory region: INVALID_ARGUMENT
// when the region the request gave is smaller than the result.
Status CheckFits(const std::string& what, const SharedMemoryRef& ref, size_t bytes) {
  if (bytes <= ref.byte_size) return Status::Ok();
  return InvalidArgument(what + " is " + std::to_string(bytes) +
                         " bytes; the shared_memory_byte_size the request gave for it in region '" +
                         ref.region->name() + "' is " + std::to_string(ref.byte_size));
}

// Tells the client where its output went (Triton's parameters, with the
// bytes written as the size).
void NoteRegion(const SharedMemoryRef& ref, size_t bytes,
                inference::ModelInferResponse::InferOutputTensor* out) {
  auto& params = *out->mutable_parameters();
  params[kSharedMemoryRegion].set_string_param(ref.region->name());
  params[kSharedMemoryByteSize].set_int64_param(static_cast<int64_t>(bytes));
  if (ref.offset != 0) params[kSharedMemoryOffset].set_int64_param(static_cast<int64_t>(ref.offset));
}

template <typename Wire, typename Field>
void UnpackInto(const std::string& raw, Field* field) {
  for (size_t pos = 0; pos + sizeof(Wire) <= raw.size(); pos += sizeof(Wire)) {
    Wire w;
    memcpy(&w, raw.data() + pos, sizeof(Wire));
    field->Add(w);
  }
}

// INT8/16/32 share int_contents (UINT8/16/32 uint_contents): the wire size picks the width.
// Only called for datatypes with a typed field (EncodeOutputs checks).
void RawToTyped(const DatatypeInfo& dt, const std::string& raw, InferTensorContents* c) {
  switch (dt.typed_field) {
    case TypedField::kBool: UnpackInto<bool>(raw, c->mutable_bool_contents()); break;
    case TypedField::kInt:
      if (dt.wire_size == 1) UnpackInto<int8_t>(raw, c->mutable_int_contents());
      else if (dt.wire_size == 2) UnpackInto<int16_t>(raw, c->mutable_int_contents());
      else UnpackInto<int32_t>(raw, c->mutable_int_contents());
      break;
    case TypedField::kInt64: UnpackInto<int64_t>(raw, c->mutable_int64_contents()); break;
    case TypedField::kUint:
      if (dt.wire_size == 1) UnpackInto<uint8_t>(raw, c->mutable_uint_contents());
      else if (dt.wire_size == 2) UnpackInto<uint16_t>(raw, c->mutable_uint_contents());
      else UnpackInto<uint32_t>(raw, c->mutable_uint_contents());
      break;
    case TypedField::kUint64: UnpackInto<uint64_t>(raw, c->mutable_uint64_contents()); break;
    case TypedField::kFp32: UnpackInto<float>(raw, c->mutable_fp32_contents()); break;
    case TypedField::kFp64: UnpackInto<double>(raw, c->mutable_fp64_contents()); break;
    case TypedField::kBytes:  // filled element by element by EncodeOutputs
    case TypedField::kNone: break;
  }
}

bool WantsTyped(const inference::ModelInferRequest::InferRequestedOutputTensor& o) {
  auto it = o.parameters().find("binary_data");
  return it != o.parameters().end() && it->second.parameter_choice_case() ==
                                           inference::InferParameter::kBoolParam &&
         !it->second.bool_param();
}

}  // namespace

Status EncodeOutputs(const std::vector<Value>& outputs, const Manifest& m,
                     const inference::ModelInferRequest& request,
                     const std::map<std::string, SharedMemoryRef>* regions,
                     inference::ModelInferResponse* response) {
  std::vector<size_t> order;
  bool typed = request.outputs_size() > 0;
  for (const auto& requested : request.outputs()) {
    size_t k = 0;
    while (k < m.outputs.size() && m.outputs[k].name != requested.name()) ++k;
    if (k == m.outputs.size()) {
      return InvalidArgument("model '" + m.name + "' has no output named '" + requested.name() + "'");
    }
    order.push_back(k);
    // One output without a typed field (FP16 / BF16) keeps the whole response raw.
    const DatatypeInfo* dt = FindDatatype(m.outputs[k].datatype);
    typed &= WantsTyped(requested) && dt != nullptr && dt->typed_field != TypedField::kNone;
  }
  if (order.empty()) {
    for (size_t k = 0; k < m.outputs.size(); ++k) order.push_back(k);
  }
  if (outputs.size() != m.outputs.size()) {
    return Internal("model returned " + std::to_string(outputs.size()) + " outputs, manifest declares " +
                    std::to_string(m.outputs.size()));
  }
  for (size_t k : order) {
    const TensorSpec& spec = m.outputs[k];
    std::string what = "output '" + spec.name + "'";
    const SharedMemoryRef* ref = nullptr;
    if (regions != nullptr) {
      auto it = regions->find(spec.name);
      if (it != regions->end()) ref = &it->second;
    }
    auto* out = response->add_outputs();
    out->set_name(spec.name);
    out->set_datatype(spec.datatype);
    const DatatypeInfo* dt = FindDatatype(spec.datatype);  // ParseManifest checked the name
    if (dt == nullptr) return Internal(what + ": unknown manifest datatype " + spec.datatype);
    std::vector<int64_t> shape;
    std::string raw;
    at::Tensor direct;  // written into the region straight from the tensor
    if (dt->type == Datatype::kBytes) {
      std::vector<std::string> items;
      shape = BytesShape(outputs[k]);
      PadEmptyBytesShape(spec, m, &shape);
      MANYPY_RETURN_IF_ERROR(FlattenBytes(what, outputs[k], 0, shape, &items));
      for (const auto& item : items) {
        if (typed && ref == nullptr) {
          out->mutable_contents()->add_bytes_contents(item);
          continue;
        }
        uint32_t n = static_cast<uint32_t>(item.size());
        raw.append(reinterpret_cast<const char*>(&n), 4).append(item);
      }
    } else {
      if (outputs[k].kind() != Value::Kind::kTensor) {
        return Internal(what + ": model '" + m.name + "' returned a " +
                        std::string(KindName(outputs[k].kind())) + ", not a tensor");
      }
      const at::Tensor& t = outputs[k].to_tensor();
      shape.assign(t.sizes().begin(), t.sizes().end());
      const std::string model_what = what + " of model '" + m.name + "'";
      if (ref != nullptr && !WidenedInTorch(dt->type)) {
        // One copy, tensor to region, instead of two through a string.
        MANYPY_RETURN_IF_ERROR(CheckTensorType(model_what, *dt, t));
        direct = t.contiguous();
      } else {
        MANYPY_RETURN_IF_ERROR(TensorToRaw(model_what, *dt, t, &raw));
        if (typed && ref == nullptr) RawToTyped(*dt, raw, out->mutable_contents());
      }
    }
    int64_t numel;
    Status shape_ok = CheckShape(what, shape, spec, m, &numel);
    if (!shape_ok.ok()) return ModelFault(shape_ok);
    for (int64_t d : shape) out->add_shape(d);
    if (ref != nullptr) {
      const char* bytes = direct.defined() ? static_cast<const char*>(direct.data_ptr()) : raw.data();
      const size_t size = direct.defined() ? direct.numel() * direct.element_size() : raw.size();
      MANYPY_RETURN_IF_ERROR(CheckFits(what, *ref, size));
      if (size > 0) memcpy(ref->data(), bytes, size);
      NoteRegion(*ref, size, out);
      raw.clear();  // an empty entry keeps raw_output_contents one per output, as Triton's
    }
    if (!typed) response->add_raw_output_contents(std::move(raw));
  }
  return Status::Ok();
}

}  // namespace manypy

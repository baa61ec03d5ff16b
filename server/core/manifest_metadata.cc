#include "server/core/manifest_metadata.h"

#include <string>

namespace manypy {
namespace {

void FillTensorMetadata(const TensorSpec& spec, const Manifest& m,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(spec.name);
  out->set_datatype(spec.datatype);
  if (m.max_batch_size > 0) out->add_shape(-1);  // the protocol's metadata shows the batch dim
  for (int64_t d : spec.shape) out->add_shape(d);
}

}  // namespace

void FillManifestMetadata(const Manifest& m, inference::ModelMetadataResponse* response) {
  response->set_name(m.name);
  response->set_platform(m.platform);
  response->add_versions(std::to_string(m.version));
  for (const auto& in : m.inputs) FillTensorMetadata(in, m, response->add_inputs());
  for (const auto& out : m.outputs) FillTensorMetadata(out, m, response->add_outputs());
}

}  // namespace manypy

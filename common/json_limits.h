// The nesting bound every JSON decoder in manypy enforces before it builds a
// value: request bodies (server/http/json_body.h) and archive manifests
// (package_format/json_fields.h). Constants only.
#pragma once

namespace manypy {

/// The deepest nesting of arrays and objects a JSON document may have (the
/// outermost value is level 1). Protobuf's default recursion limit is 100 too.
inline constexpr int kMaxJsonDepth = 100;

}  // namespace manypy

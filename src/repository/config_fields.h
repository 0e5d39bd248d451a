// Readers of the config.yaml fields several config blocks share; internal to the repository
// component.
#pragma once

#include <string>
#include <string_view>

#include "tessera/common/status.h"
#include "tessera/common/tensor.h"
#include "tessera/common/yaml_util.h"

namespace tessera::repository {

// Every config data type name but TYPE_INVALID, for "expected one of" messages.
std::string ValidDataTypeNames();
// A `dims` list: each > 0, or -1 for a variable size.
StatusOr<Shape> ReadDims(std::string_view source, const YAML::Node& node, const std::string& path);
// A `data_type`: TYPE_FP32, ...
StatusOr<DataType> ReadDataType(std::string_view source, const YAML::Node& node,
                                const std::string& path);

// A file name the repository opens inside a model's folder: no path, so a config cannot make the
// server read a file elsewhere.
Status CheckPlainFileName(std::string_view source, const YAML::Node& node, std::string_view path,
                          const std::string& name);

}  // namespace tessera::repository

#include "captures/schema.h"

#include <cstdio>

namespace luka::capture::schema {

const char* type_name(Type type) {
  switch (type) {
    case Type::kInt8: return "int8";
    case Type::kUInt8: return "uint8";
    case Type::kInt32: return "int32";
    case Type::kInt64: return "int64";
    case Type::kFloat16: return "float16";
    case Type::kFloat32: return "float32";
    case Type::kFloat64: return "float64";
    case Type::kString: return "string";
  }
  return "?";
}

std::string layer_name(int layer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "layer_%02d", layer);
  return buf;
}

std::string layer_group(const char* group, int layer) { return std::string(group) + "/" + layer_name(layer); }

std::string path(const Dataset& dataset, int layer, int level) {
  const std::string group = dataset.place == Place::kFixed ? std::string(dataset.group) : layer_group(dataset.group, layer);
  const std::string name = dataset.place == Place::kPerLevel ? dataset.name + std::to_string(level) : std::string(dataset.name);
  return group.empty() ? name : group + "/" + name;
}

}  // namespace luka::capture::schema

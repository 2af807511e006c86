#include "core/model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

std::size_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : file_(path) {
  parse_header(file_.data(), file_.size(), path.string());
}

SafetensorsFile SafetensorsFile::parse(const std::uint8_t* bytes, std::size_t size, const std::string& where) {
  SafetensorsFile file;
  file.parse_header(bytes, size, where);
  return file;
}

void SafetensorsFile::parse_header(const std::uint8_t* bytes, std::size_t size, const std::string& where) {
  if (size < 8) fail(where, "truncated safetensors file: " + std::to_string(size) + " bytes, no header length");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian
  if (header_len > size - 8)
    fail(where, "truncated safetensors file: header of " + std::to_string(header_len) +
                    " bytes does not fit in " + std::to_string(size) + " bytes");
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    fail(where, std::string("invalid safetensors header JSON: ") + e.what());
  }
  check_json_depth(std::string_view(header_begin, header_len), where, "safetensors header");
  if (!header.is_object()) fail(where, "safetensors header is not a JSON object");

  const std::uint8_t* data_begin = bytes + 8 + header_len;
  const std::uint64_t data_size = size - 8 - header_len;
  struct Span {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string tw = where + ": tensor '" + it.key() + "'";
    const nlohmann::json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      fail(tw, "header entry needs dtype, shape and data_offsets");
    SafetensorsTensor t;
    t.name = it.key();
    if (!e["dtype"].is_string()) fail(tw, "dtype is not a string");
    t.dtype = e["dtype"].get<std::string>();
    const std::size_t elem = safetensors_dtype_size(t.dtype);
    if (elem == 0) fail(tw, "unknown dtype '" + t.dtype + "'");
    if (!e["shape"].is_array()) fail(tw, "shape is not an array");
    std::uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) fail(tw, "shape entries must be non-negative integers");
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v != 0 && numel > std::numeric_limits<std::uint64_t>::max() / 8 / v) fail(tw, "shape overflows");
      numel *= v;
      t.shape.push_back(static_cast<std::int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(tw, "data_offsets must be two non-negative integers");
    const std::uint64_t begin = off[0].get<std::uint64_t>();
    const std::uint64_t end = off[1].get<std::uint64_t>();
    if (begin > end) fail(tw, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] are reversed");
    if (end > data_size)
      fail(tw, "data_offsets end " + std::to_string(end) + " is past the end of the data (" +
                   std::to_string(data_size) + " bytes; file truncated?)");
    if (end - begin != numel * elem)
      fail(tw, "data_offsets span " + std::to_string(end - begin) + " bytes but shape and dtype " + t.dtype +
                   " need " + std::to_string(numel * elem));
    t.data = data_begin + begin;
    t.nbytes = static_cast<std::size_t>(end - begin);
    spans.push_back({begin, end, t.name});
    tensors_.emplace(t.name, std::move(t));
  }
  // The format gives every tensor its own bytes: two ranges that overlap are a corrupt header.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end && spans[i].end > spans[i].begin)
      fail(where, "tensors '" + spans[i - 1].name + "' [" + std::to_string(spans[i - 1].begin) + ", " +
                      std::to_string(spans[i - 1].end) + ") and '" + spans[i].name + "' [" + std::to_string(spans[i].begin) + ", " +
                      std::to_string(spans[i].end) + ") overlap in the data");
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace luka

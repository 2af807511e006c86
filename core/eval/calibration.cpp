#include "core/eval/calibration.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::eval {
namespace {

using nlohmann::json;

// A bad field: the message names it; parse_calibration adds the file.
struct Bad {
  std::string what;
};

const json& field(const json& j, const char* key, const std::string& at) {
  if (!j.is_object()) throw Bad{at + " is not an object"};
  const auto it = j.find(key);
  if (it == j.end()) throw Bad{at + " has no \"" + key + "\""};
  return *it;
}

double number(const json& j, const char* key, const std::string& at) {
  const json& v = field(j, key, at);
  if (!v.is_number()) throw Bad{at + "." + key + " is not a number"};
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw Bad{at + "." + key + " is not finite"};
  return x;
}

std::int64_t integer(const json& j, const char* key, const std::string& at, std::int64_t lo, std::int64_t hi) {
  const json& v = field(j, key, at);
  if (!v.is_number_integer()) throw Bad{at + "." + key + " is not an integer"};
  // Unsigned values above INT64_MAX are out of range too, not wrapped.
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw Bad{at + "." + key + " is " + std::to_string(v.get<std::uint64_t>()) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi)};
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi) throw Bad{at + "." + key + " is " + std::to_string(x) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi)};
  return x;
}

const json& array(const json& j, const char* key, const std::string& at, std::size_t size) {
  const json& v = field(j, key, at);
  if (!v.is_array()) throw Bad{at + "." + key + " is not a list"};
  if (size != SIZE_MAX && v.size() != size)
    throw Bad{at + "." + key + " has " + std::to_string(v.size()) + " entries, expected " + std::to_string(size)};
  return v;
}

std::string text(const json& j, const char* key, const std::string& at) {
  const json& v = field(j, key, at);
  if (!v.is_string()) throw Bad{at + "." + key + " is not a string"};
  return v.get<std::string>();
}

}  // namespace

Calibration parse_calibration(const std::string& text_in, const std::string& where) {
  const json j = parse_json_text(text_in, where, "calibration");
  Calibration c;
  try {
    if (integer(j, "calibration", "the file", 1, 1) != 1) throw Bad{"unknown calibration version"};
    c.source = text(j, "source", "the file");
    c.model = text(j, "model", "the file");
    c.tokens = integer(j, "tokens", "the file", 2, std::numeric_limits<std::int64_t>::max());
    c.prompt_tokens = integer(j, "prompt_tokens", "the file", 1, c.tokens - 1);
    c.decode_steps = integer(j, "decode_steps", "the file", 1, c.tokens);
    c.num_layers = static_cast<int>(integer(j, "num_layers", "the file", 1, 4096));
    c.num_heads = static_cast<int>(integer(j, "num_heads", "the file", 1, 4096));
    const json& topics = field(j, "topics", "the file");
    if (!topics.is_boolean()) throw Bad{"topics is not true or false"};
    c.topics = topics.get<bool>();
    for (const json& cand : array(j, "candidates", "the file", SIZE_MAX)) c.candidates.push_back(text(cand, "name", "a candidate"));
    const std::size_t C = c.candidates.size();
    const std::size_t H = static_cast<std::size_t>(c.num_heads);
    const json& layers = array(j, "layers", "the file", static_cast<std::size_t>(c.num_layers));
    c.heads.reserve(static_cast<std::size_t>(c.num_layers) * H);
    for (int l = 0; l < c.num_layers; ++l) {
      const json& layer = layers[static_cast<std::size_t>(l)];
      const std::string at = "layer " + std::to_string(l);
      if (integer(layer, "layer", at, 0, c.num_layers - 1) != l) throw Bad{at + " is out of order"};
      const double dense = number(layer, "dense_entries", at);
      if (dense < 0) throw Bad{at + ".dense_entries is negative"};
      c.dense_entries.push_back(dense);
      const json& heads = array(layer, "heads", at, H);
      const json& per = array(layer, "candidates", at, C);
      for (std::size_t h = 0; h < H; ++h) {
        const json& hj = heads[h];
        const std::string hat = at + " head " + std::to_string(h);
        if (integer(hj, "head", hat, 0, c.num_heads - 1) != static_cast<std::int64_t>(h)) throw Bad{hat + " is out of order"};
        CalibrationHead row;
        row.layer = l;
        row.head = static_cast<int>(h);
        row.sink = number(hj, "sink", hat);
        row.entropy = number(hj, "entropy", hat);
        row.locality = number(hj, "locality", hat);
        const json& cross = field(hj, "cross_topic", hat);
        row.cross_topic = cross.is_null() ? std::numeric_limits<double>::quiet_NaN() : number(hj, "cross_topic", hat);
        c.heads.push_back(std::move(row));
      }
      for (std::size_t k = 0; k < C; ++k) {
        const std::string cat = at + " candidate " + std::to_string(k);
        const json& ph = array(per[k], "heads", cat, H);
        for (std::size_t h = 0; h < H; ++h) {
          const std::string hat = cat + " head " + std::to_string(h);
          CandidateScores s;
          s.kl = number(ph[h], "kl", hat);
          s.recall = number(ph[h], "recall", hat);
          s.rel_l2 = number(ph[h], "rel_l2", hat);
          s.entries = number(ph[h], "entries", hat);
          if (s.entries < 0) throw Bad{hat + ".entries is negative"};
          c.heads[static_cast<std::size_t>(l) * H + h].candidates.push_back(s);
        }
      }
    }
  } catch (const Bad& b) {
    fail(where, "not a calibration from luka calibrate (" + b.what + ")");
  }
  for (CalibrationHead& row : c.heads)
    for (std::size_t k = 0; k < row.candidates.size(); ++k)
      if (row.best < 0 || row.candidates[k].rel_l2 < row.candidates[static_cast<std::size_t>(row.best)].rel_l2) row.best = static_cast<int>(k);
  return c;
}

Calibration read_calibration(const std::filesystem::path& path) {
  return parse_calibration(read_text_file(path, "calibration file"), path.string());
}

}  // namespace luka::eval

#include "captures/reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "captures/consistency.h"
#include "captures/heap_check.h"
#include "captures/schema.h"
#include "core/util/half.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::capture {
namespace {

std::vector<int> to_ints(const std::vector<std::int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

}  // namespace

CaptureFile::~CaptureFile() {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  datasets_.clear();
  file_.reset();
}

std::unique_ptr<CaptureFile> CaptureFile::open(const std::filesystem::path& path) { return open(path, kSwmrReadAttempts); }

std::unique_ptr<CaptureFile> CaptureFile::open(const std::filesystem::path& path, int swmr_read_attempts) {
  if (swmr_read_attempts < 1) throw Error("CaptureFile::open: swmr_read_attempts must be at least 1");
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  std::unique_ptr<CaptureFile> f(new CaptureFile());
  f->path_ = path;
  f->name_ = path.string();
  const std::string& name = f->name_;
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) fail(name, "no such file");
  if (std::filesystem::is_directory(st)) fail(name, "is a folder, not a capture file");
  require_regular_file(path, "");
  {
    std::ifstream in(path, std::ios::binary);
    char sig[8] = {};
    in.read(sig, 8);
    if (in.gcount() < 8 || std::string(sig, 8) != "\x89HDF\r\n\x1a\n") fail(name, "not an HDF5 file (no HDF5 signature at its start)");
  }
  // HDF5 1.10 trusts a heap object's size when it reads a string attribute: a damaged one would
  // crash H5Aread below (captures/heap_check.h).
  if (const std::optional<std::string> damage = check_global_heaps(path)) fail(name, "damaged HDF5 file: " + *damage);
  if (H5Fis_hdf5(name.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    fail(name, "HDF5 cannot open it (truncated or damaged file?)");
  }
  // Single-writer-read mode opens files still being written, or cut off by a crash. It rereads a
  // metadata block whose checksum fails, sleeping 1 ns, 2 ns, 4 ns... in between: HDF5's default
  // of 100 attempts leaves a damaged file hanging for ever, 20 give up after about a millisecond.
  h5::Handle fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), name, "file access properties"));
  h5::check_status(H5Pset_metadata_read_attempts(fapl, static_cast<unsigned>(swmr_read_attempts)), name,
                   "file access properties");
  hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  }
  f->file_ = h5::Handle(h5::check(id, name, "HDF5 cannot open it (truncated or damaged file?)"));
  const hid_t file = f->file_;
  if (!h5::has_attr(file, schema::kFormatAttr) || h5::read_attr_string(file, schema::kFormatAttr, name) != kFormatName)
    fail(name, std::string("not a LuKA capture (no format = \"") + kFormatName + "\" attribute)");
  const std::int64_t version = h5::read_attr_int(file, schema::kVersionAttr, name);
  if (version < 1 || version > kFormatVersion)
    fail(name, "capture format version " + std::to_string(version) + " is not supported (this build reads version " +
                   std::to_string(kFormatVersion) + ")");
  f->version_ = version;
  for (const char* group : schema::kGroups)
    if (!h5::exists(file, group)) fail(name, std::string("damaged capture: missing group '/") + group + "'");

  Summary& s = f->summary_;
  {
    h5::Handle g(h5::check(H5Gopen2(file, schema::kManifest, H5P_DEFAULT), name, "manifest"));
    Manifest& m = s.manifest;
    for (const ManifestString& s : kManifestStrings)
      if (!s.optional || h5::has_attr(g, s.name)) m.*s.field = h5::read_attr_string(g, s.name, name);
    m.seed = h5::read_attr_int(g, schema::kSeedAttr, name);
  }
  {
    h5::Handle g(h5::check(H5Gopen2(file, schema::kLayout, H5P_DEFAULT), name, "layout"));
    Layout& l = s.layout;
    l.num_layers = static_cast<int>(h5::read_attr_int(g, schema::kNumLayersAttr, name));
    l.num_heads = static_cast<int>(h5::read_attr_int(g, schema::kNumHeadsAttr, name));
    l.num_kv_heads = static_cast<int>(h5::read_attr_int(g, schema::kNumKvHeadsAttr, name));
    l.layers = to_ints(h5::read_attr_ints(g, schema::kLayersAttr, name));
    l.heads = to_ints(h5::read_attr_ints(g, schema::kHeadsAttr, name));
    l.page_size = h5::read_attr_ints(g, schema::kPageSizeAttr, name);
    l.prompt_tokens = h5::read_attr_int(g, schema::kPromptTokensAttr, name);
    l.levels = to_ints(h5::read_attr_ints(g, schema::kLevelsAttr, name));
    l.rows = h5::read_attr_int(g, schema::kRowsAttr, name) != 0;
    l.covers = h5::read_attr_int(g, schema::kCoversAttr, name) != 0;
    l.deflate = static_cast<int>(h5::read_attr_int(g, schema::kDeflateAttr, name));
    check_layout(l, name);
  }
  s.finished = h5::has_attr(file, schema::kFinishedAttr) && h5::read_attr_int(file, schema::kFinishedAttr, name) == 1;
  {
    std::int64_t complete = 0;
    h5::Handle ds = h5::open_dataset(file, schema::path(schema::kCompleteSteps), name);
    h5::read(ds, H5T_NATIVE_INT64, {0}, {1}, &complete, name);
    h5::Handle st = h5::open_dataset(file, schema::path(schema::kStepTokens), name);
    const auto d = h5::dims(st, name);
    if (d.size() != 1 || complete < 0) fail(name, "damaged capture: bad decode/tokens or complete_steps");
    complete = std::min<std::int64_t>(complete, static_cast<std::int64_t>(d[0]));
    f->step_tokens_.resize(static_cast<std::size_t>(complete));
    h5::read(st, H5T_NATIVE_INT64, {0}, {static_cast<hsize_t>(complete)}, f->step_tokens_.data(), name);
    s.complete_steps = complete;
  }
  {
    h5::Handle ids = h5::open_dataset(file, schema::path(schema::kTokenId), name);
    const auto d = h5::dims(ids, name);
    if (d.size() != 1) fail(name, "damaged capture: tokens/id is not a list");
    std::int64_t n = static_cast<std::int64_t>(d[0]);
    // Tokens beyond the last complete step may be partial: a finished run keeps them all.
    if (!s.finished) n = std::min(n, s.layout.prompt_tokens + s.complete_steps);
    if (n < s.layout.prompt_tokens) fail(name, "damaged capture: fewer tokens than the prompt");
    s.num_tokens = n;
  }
  check_step_tokens(f->step_tokens_, s.num_tokens, name);
  for (const int layer : s.layout.layers)
    if (!h5::exists(file, schema::layer_group(schema::kPages, layer)))
      fail(name, "damaged capture: missing group '/" + schema::layer_group(schema::kPages, layer) + "'");
  // The per-step arrays: a layer axis over the recorded layers, then (for most) the heads.
  if (!h5::exists(file, schema::path(schema::kStepMode)) && !s.layout.layers.empty() &&
      h5::exists(file, schema::layer_group(schema::kDecode, s.layout.layers[0])))
    fail(name, "written by an earlier build, with one /decode group per layer; this build reads the per-step arrays of all "
               "layers in /decode (docs/capture-format.md): record the run again");
  const hsize_t L = s.layout.layers.size(), H = s.layout.heads.size();
  std::vector<std::pair<const schema::Dataset*, std::size_t>> per_step = {
      {&schema::kStepMode, 2}, {&schema::kStepPagedEnd, 2}, {&schema::kStepSeconds, 2}, {&schema::kStepCoverSize, 3}, {&schema::kStepFidelity, 4}};
  if (s.layout.rows) per_step.push_back({&schema::kStepEffective, 4});
  if (s.layout.covers)
    for (const schema::Dataset* part : {&schema::kStepCover, &schema::kStepPageState, &schema::kStepSummaryMass}) per_step.push_back({part, 4});
  // Kascade's records: in captures written since the mode exists, both or neither.
  const bool kascade_source = h5::exists(file, schema::path(schema::kStepKascadeSource));
  if (kascade_source != h5::exists(file, schema::path(schema::kStepKascadeHead)))
    fail(name, "damaged capture: '/decode/kascade_source' and '/decode/kascade_head' come together");
  if (kascade_source) {
    per_step.push_back({&schema::kStepKascadeSource, 2});
    per_step.push_back({&schema::kStepKascadeHead, 3});
  }
  f->kascade_records_ = kascade_source;
  for (const auto& [part, rank] : per_step) {
    const std::string path = schema::path(*part);
    if (!h5::exists(file, path)) fail(name, "damaged capture: missing dataset '/" + path + "'");
    const auto d = h5::dims(f->dataset(path), name);
    if (d.size() != rank || d[0] < static_cast<hsize_t>(s.complete_steps) || d[1] != L || (rank > 2 && d[2] != H))
      fail(name, "damaged capture: '/" + path + "' does not have the recorded layers and heads");
  }
  // The token spans (segments, pages) against the tokens, now rather than at the first query.
  f->segments();
  for (const int layer : s.layout.layers) f->pages(layer);
  return f;
}


hid_t CaptureFile::dataset(const std::string& path) const {
  auto it = datasets_.find(path);
  if (it == datasets_.end()) it = datasets_.emplace(path, h5::open_dataset(file_, path, name_)).first;
  return it->second;
}

Summary CaptureFile::summary() const { return summary_; }

std::vector<Token> CaptureFile::tokens() const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  const hsize_t n = static_cast<hsize_t>(summary_.num_tokens);
  TokenColumns c;
  c.ids.resize(n);
  c.segments.resize(n);
  c.generated.resize(n);
  c.piece_end.resize(n);
  c.probs.assign(n, std::numeric_limits<float>::quiet_NaN());
  h5::read(dataset(schema::path(schema::kTokenId)), H5T_NATIVE_INT32, {0}, {n}, c.ids.data(), name_);
  h5::read(dataset(schema::path(schema::kTokenSegment)), H5T_NATIVE_INT32, {0}, {n}, c.segments.data(), name_);
  if (h5::exists(file_, schema::path(schema::kTokenProb)))
    h5::read(dataset(schema::path(schema::kTokenProb)), H5T_NATIVE_FLOAT, {0}, {n}, c.probs.data(), name_);
  h5::read(dataset(schema::path(schema::kTokenGenerated)), H5T_NATIVE_UINT8, {0}, {n}, c.generated.data(), name_);
  h5::read(dataset(schema::path(schema::kTokenPieceEnd)), H5T_NATIVE_INT64, {0}, {n}, c.piece_end.data(), name_);
  const std::int64_t total = n ? c.piece_end.back() : 0;
  const auto bd = h5::dims(dataset(schema::path(schema::kTokenPieceBytes)), name_);
  if (total < 0 || static_cast<hsize_t>(total) > bd.at(0)) fail(name_, "damaged capture: token pieces out of range");
  c.pieces.assign(static_cast<std::size_t>(total), '\0');
  h5::read(dataset(schema::path(schema::kTokenPieceBytes)), H5T_NATIVE_UINT8, {0}, {static_cast<hsize_t>(total)},
           c.pieces.data(), name_);
  return tokens_from_columns(c, name_);
}

std::vector<Segment> CaptureFile::segments() const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  h5::Handle g(h5::check(H5Gopen2(file_, schema::kSegments, H5P_DEFAULT), name_, "segments"));
  SegmentColumns c;
  c.labels = h5::read_strings(g, schema::kSegmentLabel.name, name_);
  c.colours = h5::read_strings(g, schema::kSegmentColour.name, name_);
  const hsize_t n = c.labels.size();
  if (c.colours.size() != n) fail(name_, "damaged capture: segment table columns differ in length");
  c.begin.resize(n);
  c.end.resize(n);
  for (const auto& [key, v] : {std::pair{schema::path(schema::kSegmentBegin), &c.begin}, {schema::path(schema::kSegmentEnd), &c.end}}) {
    const hid_t ds = dataset(key);
    if (h5::dims(ds, name_) != std::vector<hsize_t>{n}) fail(name_, "damaged capture: segment table columns differ in length");
    h5::read(ds, H5T_NATIVE_INT64, {0}, {n}, v->data(), name_);
  }
  return segments_from_columns(c, summary_.num_tokens, name_);
}

MapWindow CaptureFile::map_window(int layer, int head, int level, std::int64_t row0, std::int64_t col0, std::int64_t rows,
                                  std::int64_t cols) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (std::find(summary_.layout.levels.begin(), summary_.layout.levels.end(), level) == summary_.layout.levels.end())
    fail(name_, "map level " + std::to_string(level) + " is not stored");
  const std::int64_t size = level_size(summary_.layout.prompt_tokens, level);
  MapWindow w;
  w.row0 = std::clamp<std::int64_t>(row0, 0, size);
  w.col0 = std::clamp<std::int64_t>(col0, 0, size);
  w.rows = std::clamp<std::int64_t>(row0 + rows, 0, size) - w.row0;
  w.cols = std::clamp<std::int64_t>(col0 + cols, 0, size) - w.col0;
  if (w.rows <= 0 || w.cols <= 0) {
    w.rows = w.cols = 0;
    return w;
  }
  std::vector<std::uint16_t> half(static_cast<std::size_t>(w.rows * w.cols));
  h5::read(dataset(schema::path(schema::kPrefillLevel, layer, level)), h5::half_type(),
           {static_cast<hsize_t>(hi), static_cast<hsize_t>(w.row0), static_cast<hsize_t>(w.col0)},
           {1, static_cast<hsize_t>(w.rows), static_cast<hsize_t>(w.cols)}, half.data(), name_);
  w.values.resize(half.size());
  halves_to_floats(half.data(), w.values.data(), half.size());
  return w;
}

std::int64_t CaptureFile::step_tokens(std::int64_t step) const {
  if (step < 1 || step > summary_.complete_steps)
    fail(name_, "decode step " + std::to_string(step) + " is not in the capture (it has " +
                    std::to_string(summary_.complete_steps) + " complete steps)");
  return step_tokens_[static_cast<std::size_t>(step - 1)];
}

std::vector<float> CaptureFile::half_row(const schema::Dataset& rows, std::int64_t step, int layer, int head) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  const std::int64_t T = step_tokens(step);
  const int li = recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.rows) fail(name_, "effective rows were not recorded");
  std::vector<std::uint16_t> half(static_cast<std::size_t>(T));
  h5::read(dataset(schema::path(rows)), h5::half_type(), {static_cast<hsize_t>(step - 1), static_cast<hsize_t>(li), static_cast<hsize_t>(hi), 0},
           {1, 1, 1, static_cast<hsize_t>(T)}, half.data(), name_);
  std::vector<float> out(half.size());
  halves_to_floats(half.data(), out.data(), half.size());
  return out;
}

std::vector<float> CaptureFile::row(std::int64_t step, int layer, int head) const { return half_row(schema::kStepEffective, step, layer, head); }

std::vector<float> CaptureFile::dense_row(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  step_tokens(step);
  const int li = recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  // The shadow ran at this step for this head when its KL is a number.
  float kl = std::numeric_limits<float>::quiet_NaN();
  h5::read(dataset(schema::path(schema::kStepFidelity)), H5T_NATIVE_FLOAT, {static_cast<hsize_t>(step - 1), static_cast<hsize_t>(li), static_cast<hsize_t>(hi), 0},
           {1, 1, 1, 1}, &kl, name_);
  if (std::isnan(kl) || !h5::exists(file_, schema::path(schema::kStepDense)))
    fail(name_, "no dense attention at step " + std::to_string(step) + " of layer " + std::to_string(layer) + " (the dense shadow was off)");
  return half_row(schema::kStepDense, step, layer, head);
}

std::vector<std::uint8_t> CaptureFile::cover(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  const std::int64_t T = step_tokens(step);
  const int li = recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail(name_, "covers were not recorded");
  std::vector<std::uint8_t> out(static_cast<std::size_t>(T));
  h5::read(dataset(schema::path(schema::kStepCover)), H5T_NATIVE_UINT8, {static_cast<hsize_t>(step - 1), static_cast<hsize_t>(li), static_cast<hsize_t>(hi), 0},
           {1, 1, 1, static_cast<hsize_t>(T)}, out.data(), name_);
  return out;
}

namespace {
// Pages that exist at a step: created at or before it.
std::int64_t pages_at(const std::vector<PageInfo>& pages, std::int64_t step) {
  std::int64_t n = 0;
  for (const PageInfo& p : pages)
    if (p.created_step < step) ++n;
  return n;
}
}  // namespace

std::vector<std::uint8_t> CaptureFile::page_states(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  step_tokens(step);
  const int li = recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail(name_, "covers were not recorded");
  const std::int64_t P = pages_at(pages(layer), step);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(P));
  if (P > 0)
    h5::read(dataset(schema::path(schema::kStepPageState)), H5T_NATIVE_UINT8, {static_cast<hsize_t>(step - 1), static_cast<hsize_t>(li), static_cast<hsize_t>(hi), 0},
             {1, 1, 1, static_cast<hsize_t>(P)}, out.data(), name_);
  return out;
}

std::vector<float> CaptureFile::summary_mass(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  step_tokens(step);
  const int li = recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail(name_, "covers were not recorded");
  const std::int64_t P = pages_at(pages(layer), step);
  std::vector<std::uint16_t> half(static_cast<std::size_t>(P));
  if (P > 0)
    h5::read(dataset(schema::path(schema::kStepSummaryMass)), h5::half_type(), {static_cast<hsize_t>(step - 1), static_cast<hsize_t>(li), static_cast<hsize_t>(hi), 0},
             {1, 1, 1, static_cast<hsize_t>(P)}, half.data(), name_);
  std::vector<float> out(half.size());
  halves_to_floats(half.data(), out.data(), half.size());
  return out;
}

std::vector<PageInfo> CaptureFile::pages(int layer) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  recorded_index(summary_.layout.layers, layer, "layer");
  const hid_t start = dataset(schema::path(schema::kPageStart, layer)), end = dataset(schema::path(schema::kPageEnd, layer)),
              created = dataset(schema::path(schema::kPageCreated, layer));
  const hsize_t n = h5::dims(start, name_).at(0);
  if (h5::dims(end, name_).at(0) < n || h5::dims(created, name_).at(0) < n) fail(name_, "damaged capture: page table columns differ");
  PageColumns c;
  c.start.resize(n);
  c.end.resize(n);
  c.created.resize(n);
  h5::read(start, H5T_NATIVE_INT64, {0}, {n}, c.start.data(), name_);
  h5::read(end, H5T_NATIVE_INT64, {0}, {n}, c.end.data(), name_);
  h5::read(created, H5T_NATIVE_INT64, {0}, {n}, c.created.data(), name_);
  // Version 1 has no member lists: every page holds [start, end).
  if (version_ >= 2) {
    const hid_t r = dataset(schema::path(schema::kPageRaw, layer)), e = dataset(schema::path(schema::kPageMemberEnd, layer)),
                m = dataset(schema::path(schema::kPageMembers, layer));
    if (h5::dims(r, name_).at(0) < n || h5::dims(e, name_).at(0) < n) fail(name_, "damaged capture: page table columns differ");
    c.raw.resize(n);
    c.member_end.resize(n);
    h5::read(r, H5T_NATIVE_UINT8, {0}, {n}, c.raw.data(), name_);
    h5::read(e, H5T_NATIVE_INT64, {0}, {n}, c.member_end.data(), name_);
    const hsize_t listed = n ? static_cast<hsize_t>(std::max<std::int64_t>(0, c.member_end[n - 1])) : 0;
    if (h5::dims(m, name_).at(0) < listed) fail(name_, "damaged capture: page members end past their table");
    c.members.resize(listed);
    if (listed) h5::read(m, H5T_NATIVE_INT64, {0}, {listed}, c.members.data(), name_);
  }
  return pages_from_columns(layer, c, version_, summary_.complete_steps, summary_.num_tokens, name_);
}

StepMetrics CaptureFile::metrics(std::int64_t step, int layer) const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  StepMetrics m;
  m.tokens = step_tokens(step);
  const hsize_t li = static_cast<hsize_t>(recorded_index(summary_.layout.layers, layer, "layer"));
  const hsize_t s = static_cast<hsize_t>(step - 1), H = summary_.layout.heads.size();
  h5::read(dataset(schema::path(schema::kStepMode)), H5T_NATIVE_INT8, {s, li}, {1, 1}, &m.mode, name_);
  h5::read(dataset(schema::path(schema::kStepPagedEnd)), H5T_NATIVE_INT64, {s, li}, {1, 1}, &m.paged_end, name_);
  h5::read(dataset(schema::path(schema::kStepSeconds)), H5T_NATIVE_DOUBLE, {s, li}, {1, 1}, &m.seconds, name_);
  m.cover_size.resize(H);
  h5::read(dataset(schema::path(schema::kStepCoverSize)), H5T_NATIVE_INT32, {s, li, 0}, {1, 1, H}, m.cover_size.data(), name_);
  m.fidelity.resize(H * 4);
  h5::read(dataset(schema::path(schema::kStepFidelity)), H5T_NATIVE_FLOAT, {s, li, 0, 0}, {1, 1, H, 4}, m.fidelity.data(), name_);
  m.kascade_head.assign(H, -1);
  if (kascade_records_) {
    h5::read(dataset(schema::path(schema::kStepKascadeSource)), H5T_NATIVE_INT32, {s, li}, {1, 1}, &m.kascade_source, name_);
    h5::read(dataset(schema::path(schema::kStepKascadeHead)), H5T_NATIVE_INT32, {s, li, 0}, {1, 1, H}, m.kascade_head.data(), name_);
  }
  return m;
}

std::uint64_t CaptureFile::file_bytes() const {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path_, ec);
  return ec ? 0 : n;
}

std::map<std::string, CaptureFile::PartSize> CaptureFile::storage() const {
  std::lock_guard<std::recursive_mutex> lock(h5::lock());
  std::map<std::string, PartSize> out;
  // Uncompressed size: the array's extent, except for per-step rows over tokens or pages, which
  // count only the T (or P) entries each step has.
  std::uint64_t token_steps = 0;
  for (const std::int64_t T : step_tokens_) token_steps += static_cast<std::uint64_t>(T);
  const std::uint64_t H = summary_.layout.heads.size();
  const auto add = [&](const std::string& part, const std::string& path, std::uint64_t entries = UINT64_MAX) {
    if (!h5::exists(file_, path)) return;
    const hid_t ds = dataset(path);
    out[part].stored += H5Dget_storage_size(ds);
    h5::Handle type(H5Dget_type(ds));
    std::uint64_t n = type.valid() ? H5Tget_size(type) : 0;
    if (entries != UINT64_MAX) {
      n *= entries;
    } else {
      for (const hsize_t d : h5::dims(ds, name_)) n *= d;
    }
    out[part].logical += n;
  };
  for (const schema::Dataset* t : {&schema::kTokenId, &schema::kTokenGenerated, &schema::kTokenSegment, &schema::kTokenProb,
                                   &schema::kTokenPieceEnd, &schema::kTokenPieceBytes})
    add("tokens", schema::path(*t));
  const std::uint64_t L = summary_.layout.layers.size();
  std::uint64_t page_steps = 0;  // over layers and steps, the pages each step has
  for (const int layer : summary_.layout.layers) {
    for (const int level : summary_.layout.levels) add("maps", schema::path(schema::kPrefillLevel, layer, level));
    const auto layer_pages = pages(layer);
    for (std::int64_t st = 1; st <= summary_.complete_steps; ++st) page_steps += static_cast<std::uint64_t>(pages_at(layer_pages, st));
    for (const schema::Dataset* t : {&schema::kPageStart, &schema::kPageEnd, &schema::kPageCreated}) add("pages", schema::path(*t, layer));
    if (version_ >= 2)
      for (const schema::Dataset* t : {&schema::kPageRaw, &schema::kPageMemberEnd, &schema::kPageMembers}) add("pages", schema::path(*t, layer));
  }
  add("rows", schema::path(schema::kStepEffective), L * H * token_steps);
  add("rows", schema::path(schema::kStepDense), L * H * token_steps);
  add("covers", schema::path(schema::kStepCover), L * H * token_steps);
  for (const schema::Dataset* t : {&schema::kStepPageState, &schema::kStepSummaryMass}) add("covers", schema::path(*t), H * page_steps);
  for (const schema::Dataset* t : schema::kStepMetrics) add("metrics", schema::path(*t));
  return out;
}

}  // namespace luka::capture

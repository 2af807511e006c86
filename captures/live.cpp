#include "captures/live.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "captures/chunk_codec.h"
#include "core/util/half.h"
#include "core/util/error.h"

namespace luka::capture {

// [SECTION] The spill file

namespace {

// $TMPDIR, else /var/tmp (on disk where /tmp is a RAM file system), else /tmp.
std::vector<std::string> spill_folders() {
  std::vector<std::string> dirs;
  if (const char* t = std::getenv("TMPDIR"); t && *t) dirs.emplace_back(t);
  dirs.emplace_back("/var/tmp");
  dirs.emplace_back("/tmp");
  return dirs;
}

}  // namespace

std::filesystem::path LiveCapture::spill_folder() {
  for (const std::string& dir : spill_folders()) {
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec) && ::access(dir.c_str(), W_OK) == 0) return dir;
  }
  return "/tmp";
}

// An unlinked temporary file that holds the map chunks beyond the memory budget. Chunks are
// appended once and never rewritten; pread and pwrite need no lock of their own.
class LiveCapture::SpillFile {
 public:
  explicit SpillFile(int fd) : fd_(fd) {}
  ~SpillFile() { ::close(fd_); }
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // In $TMPDIR, else /var/tmp (on disk where /tmp is a RAM file system), else /tmp. Null, with
  // the reason in `error`, when none takes a file.
  static std::shared_ptr<SpillFile> create(std::string* error) {
    const std::vector<std::string> dirs = spill_folders();
    std::string why;
    for (const std::string& dir : dirs) {
      int fd = -1;
#ifdef O_TMPFILE
      fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      if (fd >= 0) return std::make_shared<SpillFile>(fd);
#endif
      std::string name = dir + "/luka-live-XXXXXX";
      fd = ::mkostemp(name.data(), O_CLOEXEC);
      if (fd >= 0) {
        ::unlink(name.c_str());  // gone with the last descriptor, even after a crash
        return std::make_shared<SpillFile>(fd);
      }
      why += (why.empty() ? "" : "; ") + dir + ": " + std::strerror(errno);
    }
    *error = "cannot create a temporary file for the prefill maps (" + why + ")";
    return nullptr;
  }

  // False, with the reason in `error`, when the bytes could not all be written (a full disk).
  bool write(std::uint64_t offset, const std::uint8_t* data, std::size_t size, std::string* error) const {
    while (size > 0) {
      const ssize_t n = ::pwrite(fd_, data, size, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = std::string("cannot write the prefill maps' temporary file: ") + (n < 0 ? std::strerror(errno) : "no space");
        return false;
      }
      data += n;
      size -= static_cast<std::size_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
    return true;
  }

  void read(std::uint64_t offset, std::uint8_t* data, std::size_t size) const {
    while (size > 0) {
      const ssize_t n = ::pread(fd_, data, size, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("capture", std::string("cannot read the prefill maps' temporary file: ") + (n < 0 ? std::strerror(errno) : "short file"));
      data += n;
      size -= static_cast<std::size_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
  }

 private:
  int fd_;
};

// [SECTION] Records

LiveCapture::LiveCapture(std::size_t map_memory) : map_budget_(map_memory) {}

LiveCapture::~LiveCapture() = default;

void LiveCapture::begin(const Manifest& manifest, const Layout& layout, const std::vector<Token>& prompt,
                        const std::vector<Segment>& segments) {
  std::lock_guard<std::mutex> lock(mu_);
  summary_ = Summary{};
  summary_.manifest = manifest;
  summary_.layout = layout;
  summary_.num_tokens = static_cast<std::int64_t>(prompt.size());
  tokens_ = prompt;
  segments_ = segments;
  maps_.clear();
  spill_.reset();  // a reader still holding the last run's file keeps it open
  ++run_;
  map_bytes_ = 0;
  spilled_ = 0;
  spill_error_.clear();
  step_bytes_ = 0;
  steps_.clear();
  pages_.assign(layout.layers.size(), {});

  // Every level's chunk index, and where its chunks go: the levels whose chunks, uncompressed,
  // fit the budget together stay in memory, coarsest first (the overview and the thumbnails read
  // them); the finer ones go to the spill file.
  const std::int64_t H = static_cast<std::int64_t>(layout.heads.size());
  std::vector<int> levels = layout.levels;
  std::sort(levels.rbegin(), levels.rend());
  std::uint64_t planned = 0;
  bool fits = true;
  for (const int level : levels) {
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < layout.layers.size(); ++i) {
      LevelChunks& L = maps_[{static_cast<int>(i), level}];
      L.size = level_size(layout.prompt_tokens, level);
      L.chunk = map_chunk(layout, static_cast<int>(i), level);
      L.per_side = (L.size + L.chunk - 1) / L.chunk;
      L.chunks.resize(static_cast<std::size_t>(H * L.per_side * L.per_side));
      const auto R = static_cast<std::uint64_t>(L.per_side);
      raw += static_cast<std::uint64_t>(H) * (R * (R + 1) / 2) * static_cast<std::uint64_t>(L.chunk * L.chunk) * 2;
    }
    fits = fits && planned + raw <= map_budget_;
    if (fits) planned += raw;
    for (std::size_t i = 0; i < layout.layers.size(); ++i) maps_[{static_cast<int>(i), level}].in_memory = fits;
  }
}

void LiveCapture::map_rows(const MapRows& r, const MapChunks* chunks) {
  int i = 0, deflate = 0;
  std::int64_t c = 0, H = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    i = recorded_index(summary_.layout.layers, r.layer, "layer");
    const auto it = maps_.find({i, r.level});
    if (it == maps_.end()) fail("capture", "map level " + std::to_string(r.level) + " is not stored");
    c = it->second.chunk;
    H = static_cast<std::int64_t>(summary_.layout.heads.size());
    deflate = summary_.layout.deflate;
  }
  if (r.row0 % c != 0) fail("capture", "a map band of the live capture does not start on a chunk row");
  if (chunks) {  // encoded by the pipeline on the model's threads
    if (chunks->chunk != c || r.rows > c || chunks->tiles.size() != static_cast<std::size_t>(H * ((r.cols + c - 1) / c)))
      fail("capture", "map chunks do not match the capture's chunking");
    store_chunks(i, r.level, r.row0, {}, &chunks->tiles);
    return;
  }
  // Plain halves (a sink fed directly): encoded here, one chunk row at a time.
  if (r.data.size() != static_cast<std::size_t>(H * r.rows * r.cols)) fail("capture", "map rows of the wrong size");
  const std::int64_t per_head = (r.cols + c - 1) / c;
  for (std::int64_t b0 = 0; b0 < r.rows; b0 += c) {
    const std::int64_t rows = std::min(c, r.rows - b0);
    std::vector<std::vector<std::uint8_t>> encoded(static_cast<std::size_t>(H * per_head));
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = 0; j < per_head; ++j)
        encoded[static_cast<std::size_t>(h * per_head + j)] =
            encode_tile(r.data.data() + (h * r.rows + b0) * r.cols + j * c, sizeof(std::uint16_t), rows, std::min(c, r.cols - j * c),
                        r.cols, c, c, deflate);
    store_chunks(i, r.level, r.row0 + b0, std::move(encoded), nullptr);
  }
}

void LiveCapture::store_chunks(int layer_index, int level, std::int64_t row0, std::vector<std::vector<std::uint8_t>> owned,
                               const std::vector<std::vector<std::uint8_t>>* given) {
  const auto& list = given ? *given : owned;
  struct Pending {
    std::size_t slot, k;
    std::uint64_t offset;
  };
  std::vector<Pending> pending;
  std::shared_ptr<SpillFile> file;
  std::uint64_t run = 0;
  // Where each chunk goes, decided under the lock; the spill file is written outside it (a
  // reader waits for no disk write) and its chunks are published once written.
  {
    std::lock_guard<std::mutex> lock(mu_);
    LevelChunks& L = maps_.at({layer_index, level});
    const std::size_t H = summary_.layout.heads.size();
    const std::size_t per_head = list.size() / std::max<std::size_t>(1, H);
    const std::int64_t rb = row0 / L.chunk;
    if (rb >= L.per_side || static_cast<std::int64_t>(per_head) > L.per_side) fail("capture", "a map band lies outside its level");
    if (!L.in_memory && !spill_ && spill_error_.empty()) spill_ = SpillFile::create(&spill_error_);
    const bool can_spill = spill_ && spill_error_.empty();
    for (std::size_t k = 0; k < list.size(); ++k) {
      const std::vector<std::uint8_t>& bytes = list[k];
      if (bytes.empty()) continue;
      const std::size_t h = k / per_head, j = k % per_head;
      const std::size_t slot = (h * static_cast<std::size_t>(L.per_side) + static_cast<std::size_t>(rb)) * static_cast<std::size_t>(L.per_side) + j;
      StoredChunk& s = L.chunks[slot];
      if (s.bytes) map_bytes_ -= s.bytes->size();  // a chunk written again replaces the old one
      s = StoredChunk{};
      const bool memory = (L.in_memory && map_bytes_ + bytes.size() <= map_budget_) || !can_spill;
      if (memory) {
        s.bytes = given ? std::make_shared<const std::vector<std::uint8_t>>(bytes)
                        : std::make_shared<const std::vector<std::uint8_t>>(std::move(owned[k]));
        map_bytes_ += s.bytes->size();
      } else {
        pending.push_back({slot, k, spilled_});
        spilled_ += bytes.size();
      }
    }
    file = spill_;
    run = run_;
  }
  if (pending.empty()) return;
  std::string error;
  bool ok = true;
  for (const Pending& p : pending)
    if (ok) ok = file->write(p.offset, list[p.k].data(), list[p.k].size(), &error);
  std::lock_guard<std::mutex> lock(mu_);
  if (run != run_) return;  // a new run began meanwhile
  LevelChunks& L = maps_.at({layer_index, level});
  for (const Pending& p : pending) {
    StoredChunk& s = L.chunks[p.slot];
    if (ok) {
      s.offset = p.offset;
      s.size = static_cast<std::uint32_t>(list[p.k].size());
      s.spilled = true;
    } else {  // the disk is full: keep the run going with the chunks in memory
      s.bytes = std::make_shared<const std::vector<std::uint8_t>>(list[p.k]);
      map_bytes_ += s.bytes->size();
    }
  }
  if (!ok && spill_error_.empty()) spill_error_ = error;  // later chunks stay in memory too; the file stays for reads
}

namespace {

std::size_t step_array_bytes(const Step& s) {
  std::size_t b = 0;
  for (const LayerStep& l : s.layers)
    b += (l.effective.size() + l.dense.size() + l.summary_mass.size()) * 2 + l.cover.size() + l.page_state.size() +
         (l.cover_size.size() + l.fidelity.size()) * 4 + l.new_pages.size() * sizeof(PageInfo);
  for (const LayerStep& l : s.layers)
    for (const PageInfo& p : l.new_pages) b += p.members.size() * sizeof(std::int64_t);
  return b;
}

}  // namespace

void LiveCapture::step(const Step& s, const StepChunks* /*chunks: the view reads the plain arrays*/) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < s.layers.size() && i < pages_.size(); ++i)
    pages_[i].insert(pages_[i].end(), s.layers[i].new_pages.begin(), s.layers[i].new_pages.end());
  step_bytes_ += step_array_bytes(s);
  steps_.push_back(s);
  tokens_.insert(tokens_.end(), s.new_tokens.begin(), s.new_tokens.end());
  summary_.complete_steps = static_cast<std::int64_t>(steps_.size());
  summary_.num_tokens = static_cast<std::int64_t>(tokens_.size());
}

void LiveCapture::finish(const std::vector<Token>& trailing) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_.insert(tokens_.end(), trailing.begin(), trailing.end());
  summary_.num_tokens = static_cast<std::int64_t>(tokens_.size());
  summary_.finished = true;
}

std::size_t LiveCapture::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t index = 0;
  for (const auto& [key, L] : maps_) index += L.chunks.capacity() * sizeof(StoredChunk);
  // Each chunk in memory also has its vector and shared_ptr control block (about 64 bytes).
  std::size_t held = 0;
  for (const auto& [key, L] : maps_)
    for (const StoredChunk& s : L.chunks) held += s.bytes ? 64 : 0;
  return map_bytes_ + index + held + step_bytes_;
}

std::size_t LiveCapture::map_memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_bytes_;
}

std::uint64_t LiveCapture::spilled_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spilled_;
}

std::string LiveCapture::spill_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spill_error_;
}

// [SECTION] Queries

void LiveCapture::set_generation(std::string generation) {
  std::lock_guard<std::mutex> lock(mu_);
  summary_.manifest.generation = std::move(generation);
}

Summary LiveCapture::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summary_;
}

std::vector<Token> LiveCapture::tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

std::vector<Segment> LiveCapture::segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_;
}

MapWindow LiveCapture::map_window(int layer, int head, int level, std::int64_t row0, std::int64_t col0, std::int64_t rows,
                                  std::int64_t cols) const {
  struct Need {
    std::int64_t rb, cb;
    StoredChunk chunk;
  };
  std::vector<Need> need;
  std::shared_ptr<SpillFile> file;
  std::int64_t c = 0;
  int deflate = 0;
  MapWindow w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int li = recorded_index(summary_.layout.layers, layer, "layer");
    const int hi = recorded_index(summary_.layout.heads, head, "head");
    if (std::find(summary_.layout.levels.begin(), summary_.layout.levels.end(), level) == summary_.layout.levels.end())
      fail("capture", "map level " + std::to_string(level) + " is not stored");
    const std::int64_t S = level_size(summary_.layout.prompt_tokens, level);
    w.row0 = std::clamp<std::int64_t>(row0, 0, S);
    w.col0 = std::clamp<std::int64_t>(col0, 0, S);
    w.rows = std::max<std::int64_t>(0, std::clamp<std::int64_t>(row0 + rows, 0, S) - w.row0);
    w.cols = std::max<std::int64_t>(0, std::clamp<std::int64_t>(col0 + cols, 0, S) - w.col0);
    if (w.rows == 0 || w.cols == 0) {
      w.rows = w.cols = 0;
      return w;
    }
    w.values.assign(static_cast<std::size_t>(w.rows * w.cols), 0.f);
    const auto it = maps_.find({li, level});
    if (it == maps_.end()) return w;
    const LevelChunks& L = it->second;
    c = L.chunk;
    deflate = summary_.layout.deflate;
    file = spill_;
    for (std::int64_t rb = w.row0 / c; rb <= (w.row0 + w.rows - 1) / c; ++rb)
      for (std::int64_t cb = w.col0 / c; cb <= (w.col0 + w.cols - 1) / c; ++cb) {
        const StoredChunk& s = L.chunks[static_cast<std::size_t>((hi * L.per_side + rb) * L.per_side + cb)];
        if (s.written()) need.push_back({rb, cb, s});  // not written yet, or right of the diagonal: 0
      }
  }
  // Decoded outside the lock: the model's threads keep adding bands meanwhile.
  thread_local std::vector<std::uint8_t> packed;
  thread_local std::vector<std::uint16_t> halves;
  halves.resize(static_cast<std::size_t>(c * c));
  for (const Need& n : need) {
    const std::uint8_t* bytes = nullptr;
    std::size_t size = 0;
    if (n.chunk.bytes) {
      bytes = n.chunk.bytes->data();
      size = n.chunk.bytes->size();
    } else {
      packed.resize(n.chunk.size);
      file->read(n.chunk.offset, packed.data(), n.chunk.size);
      bytes = packed.data();
      size = n.chunk.size;
    }
    decode_chunk_to(bytes, size, static_cast<std::size_t>(c * c), sizeof(std::uint16_t), deflate, halves.data());
    const std::int64_t r0 = std::max(w.row0, n.rb * c), r1 = std::min(w.row0 + w.rows, (n.rb + 1) * c);
    const std::int64_t c0 = std::max(w.col0, n.cb * c), c1 = std::min(w.col0 + w.cols, (n.cb + 1) * c);
    for (std::int64_t r = r0; r < r1; ++r)
      halves_to_floats(halves.data() + (r - n.rb * c) * c + (c0 - n.cb * c), w.values.data() + (r - w.row0) * w.cols + (c0 - w.col0),
                       static_cast<std::size_t>(c1 - c0));
  }
  return w;
}

const Step& LiveCapture::step_at(std::int64_t step) const {
  if (step < 1 || step > static_cast<std::int64_t>(steps_.size()))
    fail("capture", "decode step " + std::to_string(step) + " is not in the capture (it has " +
                        std::to_string(steps_.size()) + " complete steps)");
  return steps_[static_cast<std::size_t>(step - 1)];
}

namespace {

// Head `i`'s slice of a [heads][n] array, n = size / heads.
template <class T>
std::vector<T> head_slice(const std::vector<T>& v, int i, std::size_t heads) {
  const std::size_t n = v.size() / heads;
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(i * n), v.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
}

std::vector<float> head_floats(const std::vector<std::uint16_t>& v, int i, std::size_t heads) {
  const std::size_t n = v.size() / heads;
  std::vector<float> out(n);
  halves_to_floats(v.data() + i * n, out.data(), n);
  return out;
}

}  // namespace

const LayerStep& LiveCapture::layer_step(std::int64_t step, int layer) const {
  return step_at(step).layers[static_cast<std::size_t>(recorded_index(summary_.layout.layers, layer, "layer"))];
}

std::vector<float> LiveCapture::row(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.rows) fail("capture", "effective rows were not recorded");
  return head_floats(ls.effective, hi, summary_.layout.heads.size());
}

std::vector<float> LiveCapture::dense_row(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (ls.dense.empty())
    fail("capture", "no dense attention at step " + std::to_string(step) + " of layer " + std::to_string(layer) + " (the dense shadow was off)");
  return head_floats(ls.dense, hi, summary_.layout.heads.size());
}

std::vector<std::uint8_t> LiveCapture::cover(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail("capture", "covers were not recorded");
  return head_slice(ls.cover, hi, summary_.layout.heads.size());
}

std::vector<std::uint8_t> LiveCapture::page_states(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail("capture", "covers were not recorded");
  return head_slice(ls.page_state, hi, summary_.layout.heads.size());
}

std::vector<float> LiveCapture::summary_mass(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail("capture", "covers were not recorded");
  return head_floats(ls.summary_mass, hi, summary_.layout.heads.size());
}

std::vector<PageInfo> LiveCapture::pages(int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pages_[recorded_index(summary_.layout.layers, layer, "layer")];
}

StepMetrics LiveCapture::metrics(std::int64_t step, int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  StepMetrics m{ls.mode, step_at(step).tokens, ls.paged_end, ls.seconds, ls.cover_size, ls.fidelity, ls.kascade_source, ls.kascade_head};
  if (m.kascade_head.empty()) m.kascade_head.assign(ls.cover_size.size(), -1);
  return m;
}

}  // namespace luka::capture

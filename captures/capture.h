// The capture model (docs/design.md §6, docs/capture-format.md): what a run records, as plain data
// without LibTorch, and the one query API that a live in-memory run (LiveCapture) and a file on
// disk (CaptureFile) both answer. The Studio, `luka inspect` and the tests read captures only
// through CaptureView.
#pragma once

#include "core/prompt/token_segment.h"
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace luka::capture {

constexpr const char* kFormatName = "luka-capture";
constexpr int kFormatVersion = 2;  // 2: pages list their members (SemantiCache); 1 still opens

// Per-token cover states, one byte per raw token and head (`cover` datasets).
enum CoverState : std::uint8_t {
  kAbsent = 0,      // not in the context at this step (position >= T)
  kSummarized = 1,  // clustered: inside an unrefined page, seen through its summary
  kRefined = 2,     // clustered: inside a refined page, attended exactly
  kRaw = 3,         // attended exactly: the raw tail (clustered), the recent window (lined), the top-k set (kascade),
                    // the kept set (press, quest), every token (dense)
  kHeavy = 4,       // lined: a heavy hitter outside the window
  kDropped = 5,     // lined: outside the window and not a heavy hitter; kascade: outside the top-k set; press: evicted;
                    // quest: in a page not selected and outside the recent window
};

// Per-page states (`page_state` datasets).
enum PageState : std::uint8_t { kNoPage = 0, kPageSummarized = 1, kPageRefined = 2 };

// Layer modes as stored (`mode` datasets); the numbers are part of the format.
enum ModeCode : std::int8_t { kModeDense = 0, kModeLined = 1, kModeClustered = 2, kModeKascade = 3, kModePress = 4, kModeQuest = 5 };
const char* mode_name(int code);  // "dense", "lined", "clustered", "kascade", "press", "quest", "?"

// Which parts of a run are recorded (`--record`).
struct RecordSpec {
  std::vector<int> layers;  // empty: all layers
  std::vector<int> heads;   // empty: all query heads
  bool maps = true;         // prefill attention pyramids
  bool rows = true;         // per decode step, the effective attention row of each head
  bool covers = true;       // per decode step, the cover raster, page states and summary mass
  std::int64_t map_cap = 2048;  // the finest stored pyramid level has at most this many rows
  std::int64_t map_min = 64;    // coarser levels are stored down to this size
  int deflate = 1;              // 0-9; -1: no compression (no shuffle, no deflate)

  // SPEC: "all", "maps", "covers", "rows", or ';'-separated items
  // "layers=0-3,8;heads=0,2;parts=maps,rows,covers;map_cap=1024;map_min=64"; layers and heads are
  // layer lists (core/util/layer_range.h). Throws luka::Error.
  static RecordSpec parse(const std::string& spec);
  std::string to_string() const;  // a SPEC that parses back to the same settings
};

// Number of rows (= columns) of pyramid level `level` for an n-token map: ceil(n / 2^level).
std::int64_t level_size(std::int64_t n, int level);
// The levels stored for an n-token map: the first with size <= cap, through the first with
// size <= min (all of them when n <= min, that is level 0 alone).
std::vector<int> stored_levels(std::int64_t n, std::int64_t cap, std::int64_t min);

struct Manifest {
  std::string model_path, architecture;
  std::string model_config;   // JSON: the model's config as loaded
  std::string weights_hash;   // sha256 of the weight files' headers (safetensors JSON / GGUF header)
  std::string tokenizer_hash; // sha256 of the tokenizer's source file (tokenizer.json / GGUF header)
  std::string luka_config;    // JSON: the full per-layer LuKA config at the start of the run
  std::string generation;     // JSON: prompt source, max_new_tokens, sampling, chat, schedule
  std::int64_t seed = 0;
  std::string device, dtype;
  std::string tool_version, git_revision;
  std::string created;        // UTC, ISO 8601
  std::string record;         // RecordSpec::to_string()
  std::string calibration;    // JSON: a `luka calibrate` file attached to the run (core/eval/calibration.h); empty: none
};

// The /manifest group's string attributes, in one table for the writer, the reader and the
// schema test (docs/capture-format.md lists the same names). `optional`: written only when not
// empty, and read as empty when absent (captures made before it existed). `seed` is the one
// integer attribute.
struct ManifestString {
  const char* name;
  std::string Manifest::*field;
  bool optional = false;
};
inline constexpr ManifestString kManifestStrings[] = {
    {"model_path", &Manifest::model_path},     {"architecture", &Manifest::architecture}, {"model_config", &Manifest::model_config},
    {"weights_hash", &Manifest::weights_hash}, {"tokenizer_hash", &Manifest::tokenizer_hash}, {"luka_config", &Manifest::luka_config},
    {"generation", &Manifest::generation},     {"device", &Manifest::device},             {"dtype", &Manifest::dtype},
    {"tool_version", &Manifest::tool_version}, {"git_revision", &Manifest::git_revision}, {"created", &Manifest::created},
    {"record", &Manifest::record},             {"calibration", &Manifest::calibration, true}};

// Shapes fixed at the start of a run.
struct Layout {
  int num_layers = 0;                 // the model's layers
  int num_heads = 0, num_kv_heads = 0;
  std::vector<int> layers;            // recorded layers, ascending
  std::vector<int> heads;             // recorded query heads, ascending
  std::vector<std::int64_t> page_size;  // per recorded layer: chunks of token axes are multiples of it
  std::int64_t prompt_tokens = 0;     // the prefill map is prompt_tokens x prompt_tokens
  std::vector<int> levels;            // stored pyramid levels (empty: no maps)
  bool rows = true, covers = true;
  int deflate = 1;
  std::int64_t max_tokens = 0;        // the most tokens the run can reach (prompt + new); 0: not known
};

struct Token {
  std::int32_t id = 0;
  std::string piece;      // the token's raw bytes (may be part of a UTF-8 character)
  bool generated = false;
  std::int32_t segment = -1;  // index into the segment table, -1: none
  float prob = std::numeric_limits<float>::quiet_NaN();  // generated: the model's probability of it when sampled
};

using Segment = TokenSegment;  // label, colour, token span [begin, end)

struct PageInfo {
  std::int64_t start = 0, end = 0, created_step = 0;
  std::vector<std::int64_t> members;  // positions, ascending, where not every one of [start, end) (SemantiCache)
  bool raw = false;                   // one token kept as it is (a delimiter, a cluster of one)

  std::int64_t size() const { return members.empty() ? end - start : static_cast<std::int64_t>(members.size()); }
  // The page's positions as runs [first, second), ascending.
  std::vector<std::pair<std::int64_t, std::int64_t>> runs() const {
    if (members.empty()) return {{start, end}};
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (const std::int64_t t : members) {
      if (!out.empty() && out.back().second == t) {
        ++out.back().second;
      } else {
        out.emplace_back(t, t + 1);
      }
    }
    return out;
  }
};

// One decode step of one recorded layer. Arrays are [heads][T] / [heads][pages] row-major over
// the recorded heads.
struct LayerStep {
  std::int8_t mode = kModeDense;
  std::int64_t paged_end = 0;
  double seconds = 0;
  std::vector<std::int32_t> cover_size;  // [heads]
  std::vector<float> fidelity;           // [heads][4] (KL, recall, top-k overlap, rel. L2), NaN without the shadow
  // Kascade: the layer whose top-k sets this layer attended (itself for an anchor), and per head the
  // KV head of that layer whose set it took; -1 for other modes and, per head, for one shared set.
  // An empty kascade_head means all -1.
  std::int32_t kascade_source = -1;
  std::vector<std::int32_t> kascade_head;  // [heads]
  std::vector<std::uint16_t> effective;  // [heads][T] IEEE half (empty unless rows are recorded)
  std::vector<std::uint16_t> dense;      // [heads][T] IEEE half: the dense shadow's attention (empty without it)
  std::vector<std::uint8_t> cover;       // [heads][T] CoverState (empty unless covers are recorded)
  std::vector<std::uint8_t> page_state;  // [heads][P] PageState (covers)
  std::vector<std::uint16_t> summary_mass;  // [heads][P] IEEE half: α of each page before refinement (covers)
  std::vector<PageInfo> new_pages;       // pages created since the previous record
};

struct Step {
  std::int64_t step = 0;    // 1 for the first decode step
  std::int64_t tokens = 0;  // T: keys attended, including the step's query token
  std::vector<Token> new_tokens;  // tokens appended since the previous record (the query token first)
  std::vector<LayerStep> layers;  // per recorded layer
};

// Storage, not data: a step's per-token and per-page arrays as their datasets' chunks, encoded
// for the filters (chunk_codec.h) on the producer's threads, for sinks that take chunks. A chunk
// holds layer_chunk() recorded layers: chunk (g, k) of a part covers layers [g * Lc, (g + 1) * Lc)
// and tokens (pages) [k * w, (k + 1) * w), at index g * n + k of its list (n chunks per row). A
// `dense` chunk of layers without the shadow at this step is empty (not written).
struct StepChunks {
  std::int64_t token_chunks = 0, page_chunks = 0;  // n of the token and page parts
  std::vector<std::vector<std::uint8_t>> effective, dense, cover, page_state, summary_mass;
};

// A band of rows of one pyramid level of one recorded layer: [heads][rows][cols] IEEE half,
// cols = the level's size (columns right of the diagonal band are zero).
struct MapRows {
  int layer = 0;  // model layer index
  int level = 0;
  std::int64_t row0 = 0, rows = 0, cols = 0;
  std::vector<std::uint16_t> data;  // empty when every sink takes the encoded chunks
};

// Storage, not data: a map band as its dataset's chunks (rows = cols = `chunk`, zero-padded),
// [heads][column chunk], encoded for its filters (chunk_codec.h), for sinks that take chunks.
struct MapChunks {
  std::int64_t chunk = 0;
  std::vector<std::vector<std::uint8_t>> tiles;
};

// What a reader answers about a whole capture.
struct Summary {
  Manifest manifest;
  Layout layout;
  std::int64_t complete_steps = 0;
  bool finished = false;           // the run ended normally (false for a live run or a cut-off file)
  std::int64_t num_tokens = 0;     // tokens readable (prompt + generated up to the last complete step)
};

// A rectangle of one pyramid level; values row-major, [rows][cols], float.
struct MapWindow {
  std::int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  std::vector<float> values;
};

struct StepMetrics {
  std::int8_t mode = kModeDense;
  std::int64_t tokens = 0, paged_end = 0;
  double seconds = 0;
  std::vector<std::int32_t> cover_size;  // [heads]
  std::vector<float> fidelity;           // [heads][4]
  std::int32_t kascade_source = -1;      // LayerStep's; -1 in captures from before Kascade
  std::vector<std::int32_t> kascade_head;  // [heads]
};

// The query API of a capture, live or on disk. Indices: `layer` and `head` are model indices
// (they must be recorded), `step` is 1-based, `level` a stored level. Throws luka::Error for
// anything not recorded or out of range.
class CaptureView {
 public:
  virtual ~CaptureView() = default;
  virtual Summary summary() const = 0;
  virtual std::vector<Token> tokens() const = 0;
  virtual std::vector<Segment> segments() const = 0;
  // A window of the prefill map, clipped to the level's size.
  virtual MapWindow map_window(int layer, int head, int level, std::int64_t row0, std::int64_t col0,
                               std::int64_t rows, std::int64_t cols) const = 0;
  virtual std::vector<float> row(std::int64_t step, int layer, int head) const = 0;          // [T]
  // The dense shadow's attention at a step ([T]); throws when the shadow was off at that step.
  virtual std::vector<float> dense_row(std::int64_t step, int layer, int head) const = 0;
  virtual std::vector<std::uint8_t> cover(std::int64_t step, int layer, int head) const = 0; // [T] CoverState
  virtual std::vector<std::uint8_t> page_states(std::int64_t step, int layer, int head) const = 0;  // [P]
  virtual std::vector<float> summary_mass(std::int64_t step, int layer, int head) const = 0;        // [P]
  virtual std::vector<PageInfo> pages(int layer) const = 0;  // created up to the last complete step
  virtual StepMetrics metrics(std::int64_t step, int layer) const = 0;

  // Conveniences over the virtual API.
  std::vector<std::int64_t> refined_pages(std::int64_t step, int layer, int head) const;
  std::vector<std::int64_t> heavy_hitters(std::int64_t step, int layer, int head) const;
};

// Index of `value` in the recorded list, or throws naming what was asked for.
int recorded_index(const std::vector<int>& recorded, int value, const char* what);

}  // namespace luka::capture

namespace luka::capture {

// Receives a run's records in order: begin, map bands (any order across layers), steps, finish.
class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  virtual void begin(const Manifest& manifest, const Layout& layout, const std::vector<Token>& prompt,
                     const std::vector<Segment>& segments) = 0;
  // `chunks`: the band encoded (for a sink that takes_chunks()), else null.
  virtual void map_rows(const MapRows& rows, const MapChunks* chunks) = 0;
  // True when the sink wants the map bands' and steps' chunks (encoded on the producer's
  // threads); the plain arrays still arrive alongside.
  virtual bool takes_chunks() const { return false; }
  // True when the sink wants the steps' chunks as well (the live capture keeps only the map's).
  virtual bool takes_step_chunks() const { return takes_chunks(); }
  virtual void end_prefill() = 0;  // all map bands delivered
  // `chunks`: the step's rows encoded (for a sink that takes_step_chunks()), else null.
  virtual void step(const Step& step, const StepChunks* chunks) = 0;
  virtual void finish(const std::vector<Token>& trailing) = 0;  // tokens sampled after the last step
};

// Chunk shapes shared by the writer and the map builder. A map's chunks are a whole number of
// its layer's pages; the token axis of the step rows, shared by every recorded layer, is a whole
// number of pages of each (their least common multiple, where that is at most 4,096 tokens), so
// chunk boundaries fall on page boundaries. A step row's chunk spans several recorded layers
// (as many as fit kStepChunkBytes of halves at the full token chunk, spread evenly over the
// layers), so that a step is a few chunks to compress, write and index rather than a few per layer.
std::int64_t map_chunk(const Layout& layout, int layer_index, int level);  // rows = cols of a map chunk
std::int64_t token_chunk(const Layout& layout);                            // token-axis chunk of step rows
std::int64_t layer_chunk(const Layout& layout);                            // layer-axis chunk of step rows
constexpr std::int64_t kPageChunk = 256;                                   // page-axis chunk of step rows
constexpr std::int64_t kPageTableChunk = 128;                              // chunk of each page table
constexpr std::int64_t kStepChunkBytes = 256 * 1024;  // most bytes of a half step-row chunk across layers

// Bytes a run would write without compression: maps, and per step rows, covers and metrics
// for `steps` decode steps (an upper bound before a run; compression shrinks it).
std::uint64_t estimate_bytes(const Layout& layout, std::int64_t steps);

}  // namespace luka::capture

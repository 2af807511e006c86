// Round trip through the capture pipeline: what the writer is given equals what the reader (and
// the live in-memory capture) return — values bit-exact for their half storage, shapes, strings,
// counters — plus the reader's errors on bad files and bad queries.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <regex>
#include <map>
#include <set>
#include <thread>

#include <zlib.h>

#include "captures/chunk_codec.h"
#include "captures/heap_check.h"
#include "captures/live.h"
#include "captures/pipeline.h"
#include "captures/reader.h"
#include "captures/schema.h"
#include "captures/writer.h"
#include "core/util/error.h"
#include "core/util/half.h"
#include "tests/process_util.h"

namespace fs = std::filesystem;

namespace luka::capture {
namespace {

fs::path work_dir() { return luka::test::test_dir("captures"); }

// Keeps every map band that reaches the sinks, to compare the reader against.
struct RecordingSink final : CaptureSink {
  std::vector<MapRows> bands;
  void begin(const Manifest&, const Layout&, const std::vector<Token>&, const std::vector<Segment>&) override {}
  void map_rows(const MapRows& r, const MapChunks*) override { bands.push_back(r); }
  void end_prefill() override {}
  void step(const Step&, const StepChunks*) override {}
  void finish(const std::vector<Token>&) override {}
};

// Counts the map bands and steps that reach a sink taking chunks with their chunks.
struct ChunkCountingSink final : CaptureSink {
  std::size_t bands = 0, encoded_bands = 0, steps = 0, encoded_steps = 0;
  void begin(const Manifest&, const Layout&, const std::vector<Token>&, const std::vector<Segment>&) override {}
  bool takes_chunks() const override { return true; }
  void map_rows(const MapRows&, const MapChunks* c) override { ++bands, encoded_bands += c && !c->tiles.empty(); }
  void end_prefill() override {}
  void step(const Step&, const StepChunks* c) override { ++steps, encoded_steps += c != nullptr; }
  void finish(const std::vector<Token>&) override {}
};

struct Synthetic {
  Manifest manifest;
  Layout layout;
  std::vector<Token> prompt, trailing;
  std::vector<Segment> segments;
  std::vector<std::vector<float>> maps;  // per recorded layer: [heads][n][n]
  std::vector<Step> steps;
};

std::uint16_t h(float f) { return float_to_half(f); }

// A run of n prompt tokens and `steps` decode steps recording model layers `layers` and heads
// `heads` (page sizes alternate 8, 16 over the recorded layers).
Synthetic make_synthetic(std::int64_t n, int steps, std::uint32_t seed, std::vector<int> layers = {1, 3}, std::vector<int> heads = {0, 2}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Synthetic s;
  Manifest& m = s.manifest;
  m.model_path = "/models/tiny";
  m.architecture = "qwen3";
  m.model_config = R"({"hidden_size": 64})";
  m.weights_hash = std::string(64, 'a');
  m.tokenizer_hash = std::string(64, 'b');
  m.luka_config = R"({"default": {"mode": "clustered"}})";
  m.generation = R"({"prompt": "ünïcode ✓"})";
  m.seed = 42;
  m.device = "cpu";
  m.dtype = "fp32";
  m.tool_version = "0.1.0";
  m.git_revision = "abc";
  m.created = "2026-11-22T00:00:00Z";
  m.record = "layers=1,3;heads=0,2;parts=maps,rows,covers;map_cap=64;map_min=8;deflate=4";
  Layout& l = s.layout;
  l.num_layers = std::max(4, *std::max_element(layers.begin(), layers.end()) + 1);
  l.num_heads = std::max(4, (*std::max_element(heads.begin(), heads.end()) + 2) / 2 * 2);
  l.num_kv_heads = 2;
  l.layers = std::move(layers);
  l.heads = std::move(heads);
  for (std::size_t i = 0; i < l.layers.size(); ++i) l.page_size.push_back(i % 2 ? 16 : 8);
  l.prompt_tokens = n;
  l.levels = stored_levels(n, 64, 8);
  l.deflate = 4;
  for (std::int64_t i = 0; i < n; ++i) {
    std::string piece = i % 7 == 3 ? std::string("\xe2\x9c") : " t" + std::to_string(i);  // part of a UTF-8 character
    s.prompt.push_back({static_cast<std::int32_t>(1000 + i), piece, false, static_cast<std::int32_t>(i < n / 2 ? 0 : 1)});
  }
  s.segments = {{"Topic A", "#1f77b4", 0, n / 2}, {"Topic B — β", "#ff7f0e", n / 2, n}};
  const std::size_t H = l.heads.size();
  for (std::size_t li = 0; li < l.layers.size(); ++li) {
    std::vector<float> map(H * n * n, 0.f);
    for (std::size_t hh = 0; hh < H; ++hh)
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c <= r; ++c) map[(hh * n + r) * n + c] = u(rng) / static_cast<float>(r + 1);
    s.maps.push_back(std::move(map));
  }
  std::int64_t created = 0;
  for (int st = 1; st <= steps; ++st) {
    Step step;
    step.step = st;
    step.tokens = n + st;
    step.new_tokens.push_back({static_cast<std::int32_t>(5 + st), "g" + std::to_string(st), true, -1, 1.0f / static_cast<float>(st + 1)});
    for (std::size_t li = 0; li < l.layers.size(); ++li) {
      LayerStep ls;
      ls.mode = static_cast<std::int8_t>(st % 4);
      if (ls.mode == kModeKascade) {  // reusing layer li's sets, head h taking KV head h % 2
        ls.kascade_source = static_cast<std::int32_t>(li);
        for (std::size_t hh = 0; hh < H; ++hh) ls.kascade_head.push_back(static_cast<std::int32_t>(hh % 2));
      }
      ls.paged_end = 8 * (st / 2);
      ls.seconds = 1e-3 * st;
      const std::int64_t T = step.tokens;
      const std::int64_t P = st / 2 + static_cast<std::int64_t>(li);
      for (std::size_t hh = 0; hh < H; ++hh) {
        ls.cover_size.push_back(static_cast<std::int32_t>(T - hh));
        for (int c = 0; c < 4; ++c) ls.fidelity.push_back(st % 2 ? std::nanf("") : u(rng));
        for (std::int64_t t = 0; t < T; ++t) {
          ls.effective.push_back(h(u(rng) / static_cast<float>(T)));
          ls.cover.push_back(static_cast<std::uint8_t>(rng() % 6));
          if (st % 2 == 0) ls.dense.push_back(h(u(rng) / static_cast<float>(T)));  // the shadow ran (fidelity set)
        }
        for (std::int64_t p = 0; p < P; ++p) {
          ls.page_state.push_back(static_cast<std::uint8_t>(1 + rng() % 2));
          ls.summary_mass.push_back(h(u(rng)));
        }
      }
      if (st % 2 == 0) ls.new_pages.push_back({created * 8, created * 8 + 8, st - 1}), ++created;
      step.layers.push_back(std::move(ls));
    }
    s.steps.push_back(std::move(step));
  }
  s.trailing.push_back({99, "<end>", true, -1});
  return s;
}

// `drain_begin`: the I/O thread writes the begin record and is idle before the first band.
void feed(CapturePipeline& pipeline, const Synthetic& s, int steps, bool drain_begin = false) {
  pipeline.begin(s.manifest, s.layout, s.prompt, s.segments);
  if (drain_begin) pipeline.drain();
  const std::int64_t n = s.layout.prompt_tokens, H = static_cast<std::int64_t>(s.layout.heads.size());
  // Interleave layers, in uneven row chunks.
  for (std::int64_t r = 0; r < n;) {
    const std::int64_t m = std::min<std::int64_t>(r % 2 ? 5 : 11, n - r);
    for (std::size_t li = 0; li < s.layout.layers.size(); ++li) {
      std::vector<float> part(static_cast<std::size_t>(H * m * n));
      for (std::int64_t hh = 0; hh < H; ++hh)
        std::copy_n(s.maps[li].data() + (hh * n + r) * n, m * n, part.data() + hh * m * n);
      pipeline.prefill_rows(s.layout.layers[li], r, m, std::move(part));
    }
    r += m;
  }
  pipeline.end_prefill();
  for (int st = 0; st < steps; ++st) pipeline.step(s.steps[static_cast<std::size_t>(st)]);
}

void expect_same(const CaptureView& v, const Synthetic& s, const std::vector<MapRows>& bands, int steps, bool finished) {
  const Summary sum = v.summary();
  EXPECT_EQ(sum.complete_steps, steps);
  EXPECT_EQ(sum.finished, finished);
  EXPECT_EQ(sum.manifest.generation, s.manifest.generation);
  EXPECT_EQ(sum.manifest.record, s.manifest.record);
  EXPECT_EQ(sum.manifest.calibration, s.manifest.calibration);
  EXPECT_EQ(sum.manifest.seed, 42);
  EXPECT_EQ(sum.layout.layers, s.layout.layers);
  EXPECT_EQ(sum.layout.heads, s.layout.heads);
  EXPECT_EQ(sum.layout.levels, s.layout.levels);
  EXPECT_EQ(sum.layout.page_size, s.layout.page_size);

  const auto tokens = v.tokens();
  std::vector<Token> expect = s.prompt;
  for (int st = 0; st < steps; ++st) expect.insert(expect.end(), s.steps[st].new_tokens.begin(), s.steps[st].new_tokens.end());
  if (finished) expect.insert(expect.end(), s.trailing.begin(), s.trailing.end());
  ASSERT_EQ(tokens.size(), expect.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i].id, expect[i].id);
    EXPECT_EQ(tokens[i].piece, expect[i].piece);
    EXPECT_EQ(tokens[i].generated, expect[i].generated);
    EXPECT_EQ(tokens[i].segment, expect[i].segment);
    EXPECT_TRUE(tokens[i].prob == expect[i].prob || (std::isnan(tokens[i].prob) && std::isnan(expect[i].prob))) << i;
  }
  const auto segs = v.segments();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[1].label, "Topic B — β");
  EXPECT_EQ(segs[1].colour, "#ff7f0e");
  EXPECT_EQ(segs[1].begin, s.segments[1].begin);

  // Maps: every band the writer got, read back through windows, bit for bit.
  const std::int64_t H = static_cast<std::int64_t>(s.layout.heads.size());
  for (const MapRows& b : bands) {
    for (std::int64_t hh = 0; hh < H; ++hh) {
      const MapWindow w = v.map_window(b.layer, s.layout.heads[hh], b.level, b.row0, 0, b.rows, b.cols);
      ASSERT_EQ(w.rows, b.rows);
      ASSERT_EQ(w.cols, b.cols);
      for (std::int64_t i = 0; i < b.rows * b.cols; ++i)
        ASSERT_EQ(float_to_half(w.values[i]), b.data[hh * b.rows * b.cols + i]) << "level " << b.level << " row " << b.row0;
    }
  }
  for (int st = 1; st <= steps; ++st) {
    const Step& step = s.steps[st - 1];
    for (std::size_t li = 0; li < s.layout.layers.size(); ++li) {
      const int layer = s.layout.layers[li];
      const LayerStep& ls = step.layers[li];
      const StepMetrics m = v.metrics(st, layer);
      EXPECT_EQ(m.mode, ls.mode);
      EXPECT_EQ(m.tokens, step.tokens);
      EXPECT_EQ(m.paged_end, ls.paged_end);
      EXPECT_EQ(m.seconds, ls.seconds);
      EXPECT_EQ(m.cover_size, ls.cover_size);
      EXPECT_EQ(m.kascade_source, ls.kascade_source);
      EXPECT_EQ(m.kascade_head, ls.kascade_head.empty() ? std::vector<std::int32_t>(static_cast<std::size_t>(H), -1) : ls.kascade_head);
      ASSERT_EQ(m.fidelity.size(), ls.fidelity.size());
      for (std::size_t i = 0; i < m.fidelity.size(); ++i)
        EXPECT_TRUE(std::memcmp(&m.fidelity[i], &ls.fidelity[i], 4) == 0 || (std::isnan(m.fidelity[i]) && std::isnan(ls.fidelity[i])));
      const std::int64_t T = step.tokens;
      const std::size_t P = ls.page_state.size() / static_cast<std::size_t>(H);
      for (std::int64_t hh = 0; hh < H; ++hh) {
        const int head = s.layout.heads[hh];
        const auto row = v.row(st, layer, head);
        ASSERT_EQ(static_cast<std::int64_t>(row.size()), T);
        for (std::int64_t t = 0; t < T; ++t) ASSERT_EQ(float_to_half(row[t]), ls.effective[hh * T + t]);
        if (ls.dense.empty()) {
          EXPECT_THROW(v.dense_row(st, layer, head), Error);
        } else {
          const auto dense = v.dense_row(st, layer, head);
          ASSERT_EQ(static_cast<std::int64_t>(dense.size()), T);
          for (std::int64_t t = 0; t < T; ++t) ASSERT_EQ(float_to_half(dense[t]), ls.dense[hh * T + t]);
        }
        const auto cov = v.cover(st, layer, head);
        EXPECT_TRUE(std::equal(cov.begin(), cov.end(), ls.cover.begin() + hh * T));
        const auto ps = v.page_states(st, layer, head);
        ASSERT_EQ(ps.size(), P) << "step " << st << " layer " << layer;
        EXPECT_TRUE(std::equal(ps.begin(), ps.end(), ls.page_state.begin() + hh * P));
        const auto mass = v.summary_mass(st, layer, head);
        for (std::size_t p = 0; p < P; ++p) EXPECT_EQ(float_to_half(mass[p]), ls.summary_mass[hh * P + p]);
        std::vector<std::int64_t> refined;
        for (std::size_t p = 0; p < P; ++p)
          if (ls.page_state[hh * P + p] == kPageRefined) refined.push_back(static_cast<std::int64_t>(p));
        EXPECT_EQ(v.refined_pages(st, layer, head), refined);
      }
    }
  }
}

// The synthetic page table: layer index li has P = st/2 + li pages at step st. Make the page
// table agree: a page for each page index ever used, created before its first use.
void align_pages(Synthetic& s) {
  for (std::size_t li = 0; li < s.layout.layers.size(); ++li) {
    std::int64_t made = 0;
    for (Step& step : s.steps) {
      LayerStep& ls = step.layers[li];
      ls.new_pages.clear();
      const std::int64_t need_next = (step.step + 1) / 2 + static_cast<std::int64_t>(li);  // pages used at the next step
      while (made < need_next) {
        ls.new_pages.push_back({made * 8, made * 8 + 8, made < static_cast<std::int64_t>(li) ? 0 : step.step});
        ++made;
      }
    }
  }
}

TEST(CaptureFile, RoundTripEqualsWhatTheWriterGot) {
  Synthetic s = make_synthetic(150, 7, 1);
  align_pages(s);
  const fs::path file = work_dir() / "run.h5";
  CaptureWriter writer(file);
  LiveCapture live;
  RecordingSink rec;
  {
    CapturePipeline pipeline({&writer, &live, &rec}, 1 << 16);  // a small queue: the producer waits
    feed(pipeline, s, 7);
    pipeline.finish(s.trailing);
  }
  ASSERT_FALSE(rec.bands.empty());
  // Each stored level arrives whole: rows [0, size) in order.
  for (const int k : s.layout.levels) {
    std::int64_t rows = 0;
    for (const MapRows& b : rec.bands)
      if (b.level == k && b.layer == 1) rows += b.rows;
    EXPECT_EQ(rows, level_size(150, k));
  }
  const auto f = CaptureFile::open(file);
  expect_same(*f, s, rec.bands, 7, true);
  expect_same(live, s, rec.bands, 7, true);
  // Pages are read with their creation steps.
  EXPECT_EQ(f->pages(3).size(), live.pages(3).size());
  EXPECT_EQ(f->pages(3).at(1).created_step, live.pages(3).at(1).created_step);
  const auto parts = f->storage();
  EXPECT_GT(parts.at("maps").stored, 0u);
  EXPECT_GT(parts.at("rows").logical, 0u);
}

// SemantiCache's pages (format version 2): member lists and raw flags read back as written, from
// the file and the live view; a version 1 file (no member datasets) opens with every page whole,
// and member ends out of order are damage.
void int_attr(hid_t obj, const char* name, long long v);

// Overwrites element `index` of the int64 dataset at `path`.
void write_int64_at(hid_t file, const char* path, hsize_t index, std::int64_t value) {
  const hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
  const hsize_t count = 1;
  const hid_t space = H5Dget_space(ds), mem = H5Screate_simple(1, &count, nullptr);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, &index, nullptr, &count, nullptr);
  H5Dwrite(ds, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, &value);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(ds);
}

TEST(CaptureFile, PageMembersRoundTripAndVersionOneFilesOpen) {
  Synthetic s = make_synthetic(150, 7, 11);
  align_pages(s);
  std::vector<PageInfo> fed;  // layer 1's pages, as written
  for (Step& step : s.steps)
    for (PageInfo& p : step.layers[0].new_pages) {
      const std::int64_t k = static_cast<std::int64_t>(fed.size());
      if (k % 3 == 1) p.members = {p.start, p.start + 2, p.start + 5, p.end - 1};  // a cluster with gaps
      if (k % 3 == 2) {
        p.end = p.start + 1;  // a delimiter kept raw
        p.raw = true;
      }
      fed.push_back(p);
    }
  ASSERT_GE(fed.size(), 3u);
  const fs::path file = work_dir() / "members.h5";
  CaptureWriter writer(file);
  LiveCapture live;
  RecordingSink rec;
  {
    CapturePipeline pipeline({&writer, &live, &rec}, 1 << 20);
    feed(pipeline, s, 7);
    pipeline.finish(s.trailing);
  }
  const auto same = [&](const std::vector<PageInfo>& got, bool listed) {
    ASSERT_EQ(got.size(), fed.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].start, fed[i].start) << i;
      EXPECT_EQ(got[i].end, fed[i].end) << i;
      EXPECT_EQ(got[i].created_step, fed[i].created_step) << i;
      EXPECT_EQ(got[i].members, listed ? fed[i].members : std::vector<std::int64_t>{}) << i;
      EXPECT_EQ(got[i].raw, listed && fed[i].raw) << i;
    }
  };
  const auto f = CaptureFile::open(file);
  same(f->pages(1), true);
  same(live.pages(1), true);
  EXPECT_EQ(fed[1].runs(), (std::vector<std::pair<std::int64_t, std::int64_t>>{{fed[1].start, fed[1].start + 1},
                                                                               {fed[1].start + 2, fed[1].start + 3},
                                                                               {fed[1].start + 5, fed[1].start + 6},
                                                                               {fed[1].end - 1, fed[1].end}}));
  expect_same(*f, s, rec.bands, 7, true);

  const auto edited = [&](const std::string& name, const std::function<void(hid_t)>& edit) {
    const fs::path p = work_dir() / name;
    fs::copy_file(file, p, fs::copy_options::overwrite_existing);
    const hid_t h = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(h, 0);
    edit(h);
    H5Fclose(h);
    return p;
  };
  const fs::path v1 = edited("members_v1.h5", [](hid_t h) {
    for (const char* layer : {"pages/layer_01/", "pages/layer_03/"})
      for (const char* part : {"raw", "member_end", "members"}) EXPECT_GE(H5Ldelete(h, (std::string(layer) + part).c_str(), H5P_DEFAULT), 0);
    EXPECT_GE(H5Adelete(h, "version"), 0);
    int_attr(h, "version", 1);
  });
  const auto old = CaptureFile::open(v1);
  same(old->pages(1), false);
  EXPECT_EQ(old->pages(3).size(), f->pages(3).size());
  EXPECT_GT(old->storage().at("pages").logical, 0u);

  // Page 2's end before page 1's.
  const fs::path bad = edited("members_bad.h5", [](hid_t h) { write_int64_at(h, "pages/layer_01/member_end", 2, 0); });
  try {
    CaptureFile::open(bad);  // page spans are checked when the file opens
    ADD_FAILURE() << "member ends out of order read without an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not ascending"), std::string::npos) << e.what();
  }
}

// A calibration attached to the manifest reads back whole, at the size of a 28-layer, 16-head
// model's file (about 300 KB: beyond HDF5's 64 KB compact attributes).
TEST(CaptureFile, ManifestCalibrationOfAFullSizeModelRoundTrips) {
  Synthetic s = make_synthetic(40, 2, 3);
  align_pages(s);
  std::string text = "{\"layers\": [";
  for (int i = 0; text.size() < 400000; ++i) text += (i ? ", " : "") + std::to_string(i * 0.001);
  text += "]}";
  s.manifest.calibration = text;
  const fs::path file = work_dir() / "calibrated.h5";
  CaptureWriter writer(file);
  RecordingSink rec;
  {
    CapturePipeline pipeline({&writer, &rec}, 1 << 20);
    feed(pipeline, s, 2);
    pipeline.finish(s.trailing);
  }
  const auto f = CaptureFile::open(file);
  expect_same(*f, s, rec.bands, 2, true);
  EXPECT_EQ(f->summary().manifest.calibration.size(), text.size());
}

// The manifest's attribute names: what the writer puts in /manifest (with every optional one set)
// is the table kManifestStrings plus seed, and docs/capture-format.md's /manifest rows name
// exactly those.
TEST(CaptureFile, ManifestAttributesAreTheSchemaTableAndTheDocs) {
  std::set<std::string> table = {"seed"};
  for (const ManifestString& m : kManifestStrings) table.insert(m.name);

  Synthetic s = make_synthetic(40, 1, 5);
  align_pages(s);
  s.manifest.calibration = R"({"calibration": 1})";
  const fs::path file = work_dir() / "schema.h5";
  CaptureWriter writer(file);
  {
    CapturePipeline pipeline({&writer}, 1 << 20);
    feed(pipeline, s, 1);
    pipeline.finish(s.trailing);
  }
  std::set<std::string> written;
  {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t g = H5Gopen2(f, "manifest", H5P_DEFAULT);
    H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, nullptr,
                [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                  static_cast<std::set<std::string>*>(out)->insert(name);
                  return 0;
                },
                &written);
    H5Gclose(g);
    H5Fclose(f);
  }
  EXPECT_EQ(written, table);

  // The docs: the backticked names in the rows between the /manifest and /layout headings.
  std::ifstream doc(fs::path(LUKA_SOURCE_DIR) / "docs" / "capture-format.md");
  ASSERT_TRUE(doc) << "docs/capture-format.md";
  std::set<std::string> documented;
  bool inside = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.find("**`/manifest`** attrs") != std::string::npos) inside = true;
    else if (line.find("**`/layout`** attrs") != std::string::npos) break;
    else if (inside && line.rfind("| `", 0) == 0) {
      const std::string names = line.substr(2, line.find(" |", 2) - 2);  // the first cell: `a`, `b`
      for (std::size_t i = names.find('`'); i != std::string::npos; i = names.find('`', names.find('`', i + 1) + 1))
        documented.insert(names.substr(i + 1, names.find('`', i + 1) - i - 1));
    }
  }
  EXPECT_EQ(documented, table) << "docs/capture-format.md's /manifest rows";
}

// A ParallelFor over real threads (three ranges), so that chunk encoding runs concurrently.
void three_threads(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
  std::vector<std::thread> t;
  for (int i = 0; i < 3; ++i) t.emplace_back([&, i] { body(n * i / 3, n * (i + 1) / 3); });
  for (auto& x : t) x.join();
}

// Writes the synthetic run's first `steps` steps to `file` through a pipeline (writer plus a sink
// that keeps the map bands) and returns the bands.
std::vector<MapRows> write_run(const fs::path& file, const Synthetic& s, int steps, ParallelFor parallel = serial_for,
                               ChunkCountingSink* counter = nullptr,
                               CapturePipeline::StepEncoding encoding = CapturePipeline::StepEncoding::kProducer,
                               CapturePipeline::ProducerTime* time = nullptr) {
  CaptureWriter writer(file);
  RecordingSink rec;
  std::vector<CaptureSink*> sinks{&writer, &rec};
  if (counter) sinks.push_back(counter);
  CapturePipeline pipeline(sinks);
  pipeline.set_parallel(std::move(parallel));
  pipeline.set_step_encoding(encoding);
  feed(pipeline, s, steps);
  pipeline.finish(s.trailing);
  if (time) *time = pipeline.producer_time();
  return rec.bands;
}

// An HDF5 dataset's stored type in the schema's words ("int64", "float16", "string").
std::string stored_type_name(hid_t dataset) {
  const hid_t t = H5Dget_type(dataset);
  std::string name = "?";
  const std::size_t size = H5Tget_size(t);
  switch (H5Tget_class(t)) {
    case H5T_INTEGER: name = std::string(H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(8 * size); break;
    case H5T_FLOAT: name = "float" + std::to_string(8 * size); break;
    case H5T_STRING: name = "string"; break;
    default: break;
  }
  H5Tclose(t);
  return name;
}

// docs/capture-format.md's table: each documented dataset's path ("tokens/id",
// "pages/layer_LL/start", "prefill/layer_LL/level_K") with its type, from the group rows
// (**`/tokens`**) and the rows under them (`id` | int32 [N]; several names take the types in order,
// or one type for all); and each group's attribute names (rows under "**`/layout`** attrs").
struct DocTable {
  std::map<std::string, std::string> datasets;
  std::map<std::string, std::set<std::string>> attrs;
};

DocTable read_doc_table() {
  static const std::regex kType("\\b(u?int(8|32|64)|float(16|32|64)|string)\\b");
  std::ifstream doc(fs::path(LUKA_SOURCE_DIR) / "docs" / "capture-format.md");
  DocTable table;
  std::string group;
  bool attrs = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    const std::size_t cell_end = line.find(" | ", 2);
    if (cell_end == std::string::npos) continue;
    std::string first = line.substr(2, cell_end - 2);
    const std::string second = line.substr(cell_end + 3, line.find(" |", cell_end + 3) - cell_end - 3);
    std::vector<std::string> names;
    for (std::size_t i = first.find('`'); i != std::string::npos; i = first.find('`', first.find('`', i + 1) + 1))
      names.push_back(first.substr(i + 1, first.find('`', i + 1) - i - 1));
    if (names.empty()) continue;
    std::string prefix = group;
    if (first.rfind("**`/", 0) == 0) {  // a group's row: its path, then maybe names in it
      std::string path = names.front().substr(1);
      names.erase(names.begin());
      attrs = first.find(" attrs") != std::string::npos;
      if (!path.empty() && path.back() == '/') path.pop_back();
      if (names.empty() && !attrs && !second.empty() && std::regex_search(second, kType)) {
        table.datasets[path] = std::smatch(*std::sregex_iterator(second.begin(), second.end(), kType))[0];  // a dataset of its own
        continue;
      }
      group = path;
      prefix = group;
      if (names.empty()) continue;
    }
    if (names.front().rfind("/", 0) == 0) {  // `/complete_steps`, `/` attrs: at the root
      if (first.find("attr") != std::string::npos) continue;
      prefix.clear();
      for (std::string& n : names) n = n.substr(1);
    }
    if (attrs) {
      for (const std::string& n : names) table.attrs[prefix].insert(n);
      continue;
    }
    std::vector<std::string> types;
    for (auto it = std::sregex_iterator(second.begin(), second.end(), kType); it != std::sregex_iterator(); ++it) types.push_back((*it)[0]);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string type = types.size() == names.size() ? types[i] : types.size() == 1 ? types[0] : "?";
      table.datasets[prefix.empty() ? names[i] : prefix + "/" + names[i]] = type;
    }
  }
  return table;
}

// The schema (captures/schema.h), a written file and docs/capture-format.md's table agree: the
// file holds exactly the schema's datasets, each stored as the schema's type, the table lists
// each with that type, and the /layout attributes are the schema's in all three.
TEST(CaptureFile, DatasetsAreTheSchemaTheFileAndTheDocs) {
  Synthetic s = make_synthetic(40, 2, 5);
  align_pages(s);
  ASSERT_FALSE(s.layout.levels.empty());
  const fs::path file = work_dir() / "datasets.h5";
  write_run(file, s, 2);
  std::map<std::string, std::string> expected, documented_expected;
  for (const schema::Dataset* d : schema::kDatasets) {
    const std::string type = schema::type_name(d->type);
    if (d->place == schema::Place::kFixed) {
      expected[schema::path(*d)] = type;
      documented_expected[schema::path(*d)] = type;
      continue;
    }
    for (const int layer : s.layout.layers) {
      if (d->place == schema::Place::kPerLayer) expected[schema::path(*d, layer)] = type;
      for (const int level : s.layout.levels)
        if (d->place == schema::Place::kPerLevel) expected[schema::path(*d, layer, level)] = type;
    }
    documented_expected[std::string(d->group) + "/layer_LL/" + (d->place == schema::Place::kPerLevel ? d->name + std::string("K") : d->name)] = type;
  }

  std::map<std::string, std::string> written;
  std::set<std::string> layout_attrs;
  {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    struct Visit {
      hid_t file;
      std::map<std::string, std::string>* out;
    } visit{f, &written};
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC,
             [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
               auto* v = static_cast<Visit*>(data);
               const hid_t o = H5Oopen(v->file, name, H5P_DEFAULT);
               if (H5Iget_type(o) == H5I_DATASET) (*v->out)[name] = stored_type_name(o);
               H5Oclose(o);
               return 0;
             },
             &visit);
    const hid_t g = H5Gopen2(f, schema::kLayout, H5P_DEFAULT);
    H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, nullptr,
                [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                  static_cast<std::set<std::string>*>(out)->insert(name);
                  return 0;
                },
                &layout_attrs);
    H5Gclose(g);
    H5Fclose(f);
  }
  EXPECT_EQ(written, expected);
  const std::set<std::string> schema_layout(std::begin(schema::kLayoutAttrs), std::end(schema::kLayoutAttrs));
  EXPECT_EQ(layout_attrs, schema_layout);

  const DocTable doc = read_doc_table();
  EXPECT_EQ(doc.datasets, documented_expected) << "docs/capture-format.md's dataset rows";
  ASSERT_TRUE(doc.attrs.count(schema::kLayout));
  EXPECT_EQ(doc.attrs.at(schema::kLayout), schema_layout) << "docs/capture-format.md's /layout rows";
}

TEST(ChunkCodec, BytesAreShuffleThenAZlibStream) {
  std::mt19937 rng(7);
  std::vector<std::uint16_t> v(256 * 256);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 3 ? h(std::ldexp(1.f, -static_cast<int>(rng() % 20))) : 0;
  for (const int level : {-1, 0, 1, 4, 9}) {
    const auto enc = encode_chunk(v.data(), v.size(), 2, level);
    std::vector<std::uint8_t> planes(v.size() * 2);
    if (level < 0) {
      ASSERT_EQ(enc.size(), planes.size());
      EXPECT_EQ(std::memcmp(enc.data(), v.data(), enc.size()), 0);
      continue;
    }
    // Independent decoder: zlib's own inflate, then undo the byte shuffle by hand.
    uLongf got = static_cast<uLongf>(planes.size());
    ASSERT_EQ(uncompress(planes.data(), &got, enc.data(), static_cast<uLong>(enc.size())), Z_OK) << "level " << level;
    ASSERT_EQ(got, planes.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(static_cast<std::uint16_t>(planes[i] | (planes[v.size() + i] << 8)), v[i]) << "level " << level << " at " << i;
    EXPECT_EQ(decode_chunk(enc.data(), enc.size(), v.size(), 2, level),
              std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(v.data()),
                                        reinterpret_cast<const std::uint8_t*>(v.data()) + v.size() * 2));
    if (level >= 1) EXPECT_LT(enc.size(), planes.size()) << "level " << level;
  }
  const std::uint16_t one = h(0.5f);  // a single element: shuffle leaves it as it is
  const auto enc = encode_chunk(&one, 1, 2, 1);
  EXPECT_EQ(decode_chunk(enc.data(), enc.size(), 1, 2, 1), (std::vector<std::uint8_t>{static_cast<std::uint8_t>(one & 0xff), static_cast<std::uint8_t>(one >> 8)}));
}

// Map chunks encoded by the pipeline (on several threads) read back through HDF5's own filters
// equal to the halves a sink without chunks gets, at every compression setting.
TEST(CaptureFile, EncodedMapChunksReadBackAtEveryDeflateSetting) {
  for (const int level : {-1, 0, 1, 9}) {
    Synthetic s = make_synthetic(150, 2, 11);
    align_pages(s);
    s.layout.deflate = level;
    const fs::path file = work_dir() / ("run" + std::to_string(level) + ".h5");
    ChunkCountingSink counter;
    const std::vector<MapRows> bands = write_run(file, s, 2, three_threads, &counter);
    // The writer asked for chunks: a sink taking them gets every band and step encoded, one that
    // does not gets the plain rows.
    EXPECT_EQ(counter.encoded_bands, bands.size());
    EXPECT_EQ(counter.bands, bands.size());
    EXPECT_EQ(counter.encoded_steps, 2u);
    for (const MapRows& b : bands) EXPECT_FALSE(b.data.empty());
    const auto f = CaptureFile::open(file);
    EXPECT_EQ(f->summary().layout.deflate, level);
    expect_same(*f, s, bands, 2, true);
  }
}

// Steps compressed on the I/O thread (a GPU run's choice) are the same chunks as those compressed
// by the producer: the file reads back the same, and every step reached the chunk-taking sinks
// encoded. The producer's time counts each step once.
TEST(CaptureFile, StepsCompressedByTheWriterReadBackTheSame) {
  for (const int level : {0, 1, 9}) {
    Synthetic s = make_synthetic(150, 3, 13);
    align_pages(s);
    s.layout.deflate = level;
    const fs::path writer_file = work_dir() / ("writer" + std::to_string(level) + ".h5");
    const fs::path producer_file = work_dir() / ("producer" + std::to_string(level) + ".h5");
    ChunkCountingSink counter;
    CapturePipeline::ProducerTime time;
    const std::vector<MapRows> bands =
        write_run(writer_file, s, 3, three_threads, &counter, CapturePipeline::StepEncoding::kWriter, &time);
    EXPECT_EQ(counter.encoded_steps, 3u);
    EXPECT_EQ(time.steps, 3);
    EXPECT_GE(time.step_seconds, time.wait_seconds);
    EXPECT_GE(time.wait_seconds, 0);
    const auto f = CaptureFile::open(writer_file);
    expect_same(*f, s, bands, 3, true);
    // Byte for byte the same step rows as the producer's encoding gives.
    write_run(producer_file, s, 3, three_threads);
    const auto g = CaptureFile::open(producer_file);
    for (std::int64_t step = 1; step <= 3; ++step)
      for (const int layer : s.layout.layers)
        for (const int head : s.layout.heads) {
          EXPECT_EQ(f->row(step, layer, head), g->row(step, layer, head)) << "step " << step << " layer " << layer << " head " << head;
          EXPECT_EQ(f->cover(step, layer, head), g->cover(step, layer, head));
        }
  }
}

// Step rows longer than one token chunk (1024): several encoded chunks per row, the last padded.
TEST(CaptureFile, EncodedStepRowsSpanTokenChunks) {
  Synthetic s = make_synthetic(1030, 3, 12);
  align_pages(s);
  s.layout.levels = {3, 4};
  const fs::path file = work_dir() / "run.h5";
  const std::vector<MapRows> bands = write_run(file, s, 3, three_threads);
  const auto f = CaptureFile::open(file);
  expect_same(*f, s, bands, 3, true);
  EXPECT_EQ(f->row(3, 3, 2).size(), 1033u);
}

// Told the run's length, the writer keeps each step row in one chunk: the chunk spans the most
// tokens the run reaches (in whole pages of every recorded layer, at most 4,096), and the rows
// still read back exactly.
TEST(CaptureFile, StepRowsOfAKnownRunLengthAreOneChunk) {
  Layout l;
  l.page_size = {16};
  l.max_tokens = 1089;
  EXPECT_EQ(token_chunk(l), 1104);  // 69 pages of 16
  l.page_size = {16, 7};
  EXPECT_EQ(token_chunk(l), 1120);  // 10 x 112: pages of 16 and of 7 both end on its boundaries
  l.page_size = {16};
  l.max_tokens = 50000;
  EXPECT_EQ(token_chunk(l), 4096);
  l.max_tokens = 0;
  EXPECT_EQ(token_chunk(l), 1024);
  l.page_size = {4093, 4091};  // no common multiple up to 4,096 tokens: no alignment
  EXPECT_EQ(token_chunk(l), 1024);

  Synthetic s = make_synthetic(1030, 3, 14);
  align_pages(s);
  s.layout.levels = {3, 4};
  s.layout.max_tokens = 1033;
  const fs::path file = work_dir() / "run.h5";
  const std::vector<MapRows> bands = write_run(file, s, 3, three_threads);
  const auto f = CaptureFile::open(file);
  expect_same(*f, s, bands, 3, true);
  for (int i = 0; i < 2; ++i) {
    const std::string name = i == 0 ? "/decode/effective" : "/decode/cover";
    const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(h5, 0);
    const hid_t ds = H5Dopen2(h5, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(ds, 0) << name;
    const hid_t dcpl = H5Dget_create_plist(ds);
    hsize_t chunk[4] = {};
    ASSERT_EQ(H5Pget_chunk(dcpl, 4, chunk), 4);
    const hsize_t want[4] = {1, 2, s.layout.heads.size(), static_cast<hsize_t>(token_chunk(s.layout))};
    for (int k = 0; k < 4; ++k) EXPECT_EQ(chunk[k], want[k]) << name << " axis " << k;  // one step, both layers, whole rows
    EXPECT_GE(chunk[3], 1033u) << name;  // the longest row (T = 1030 + 3) fits one chunk
    H5Pclose(dcpl);
    H5Dclose(ds);
    H5Fclose(h5);
  }
}

// The step rows of a group of layers share a chunk [1, Lc, H, ct]: the last group is padded with
// zero rows, and a group none of whose layers ran the dense shadow at a step has no dense chunk
// there. Every row still reads back exactly.
TEST(CaptureFile, StepRowsOfALayerGroupShareAChunk) {
  std::vector<int> heads(16);
  for (int i = 0; i < 16; ++i) heads[static_cast<std::size_t>(i)] = i;
  Synthetic s = make_synthetic(48, 3, 15, {0, 1, 2, 3, 5}, heads);  // layer 5's pages reach token 48
  align_pages(s);
  s.layout.max_tokens = 4096;  // 16 heads x 4,096 halves: 128 KiB a layer, two to a chunk
  ASSERT_EQ(token_chunk(s.layout), 4096);
  ASSERT_EQ(layer_chunk(s.layout), 2);  // groups: recorded layers {0, 1}, {2, 3}, {4 and a padding row}
  // At step 2 (whose dense shadow ran in every layer) take it away from the middle group.
  for (const std::size_t li : {2u, 3u}) {
    LayerStep& ls = s.steps[1].layers[li];
    ls.dense.clear();
    std::fill(ls.fidelity.begin(), ls.fidelity.end(), std::nanf(""));
  }
  const fs::path file = work_dir() / "run.h5";
  const std::vector<MapRows> bands = write_run(file, s, 3, three_threads);
  expect_same(*CaptureFile::open(file), s, bands, 3, true);

  const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(h5, 0);
  const hid_t ds = H5Dopen2(h5, "/decode/dense", H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  const hid_t dcpl = H5Dget_create_plist(ds);
  hsize_t chunk[4] = {};
  ASSERT_EQ(H5Pget_chunk(dcpl, 4, chunk), 4);
  EXPECT_EQ(chunk[0], 1u);
  EXPECT_EQ(chunk[1], 2u);
  EXPECT_EQ(chunk[2], 16u);
  EXPECT_EQ(chunk[3], 4096u);
  // Step 2 (index 1): chunks of groups 0 and 2 were written, that of group 1 was not.
  const auto stored = [&](hsize_t group) {
    const hsize_t offset[4] = {1, 2 * group, 0, 0};
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &size) < 0) return false;
    return addr != HADDR_UNDEF && size > 0;
  };
  EXPECT_TRUE(stored(0));
  EXPECT_FALSE(stored(1));
  EXPECT_TRUE(stored(2));
  H5Pclose(dcpl);
  H5Dclose(ds);
  H5Fclose(h5);
}

// The size announced before a run: without compression, the chunks stored match the estimate
// (maps exactly; the whole within the allowance for token pieces, whose bytes are not known ahead).
TEST(CaptureFile, EstimateMatchesTheStoredChunksWithoutCompression) {
  Synthetic s = make_synthetic(300, 4, 13);
  align_pages(s);
  s.layout.deflate = -1;
  for (Step& st : s.steps)
    for (LayerStep& ls : st.layers) ls.dense.clear();  // dense-shadow rows are not part of the estimate
  const fs::path file = work_dir() / "run.h5";
  write_run(file, s, 4);
  const auto parts = CaptureFile::open(file)->storage();
  Layout maps_only = s.layout;
  maps_only.rows = maps_only.covers = false;
  Layout nothing = maps_only;
  nothing.levels.clear();
  EXPECT_EQ(parts.at("maps").stored, estimate_bytes(maps_only, 0) - estimate_bytes(nothing, 0));
  std::uint64_t stored = 0;
  for (const auto& [name, part] : parts) stored += part.stored;
  const std::uint64_t estimate = estimate_bytes(s.layout, 4);
  EXPECT_LE(stored, estimate);
  EXPECT_GE(static_cast<double>(stored), 0.97 * static_cast<double>(estimate));
}

TEST(CaptureFile, ANewRunReplacesAFileThatIsOpenForReading) {
  // Recording over a capture that is being replayed: the new run gets a new file at the path,
  // and the open reader keeps reading the old one (map windows are read lazily, from the file).
  const fs::path file = work_dir() / "run.h5";
  Synthetic a = make_synthetic(150, 2, 21), b = make_synthetic(200, 3, 22);
  align_pages(a);
  align_pages(b);
  write_run(file, a, 2);
  const auto old = CaptureFile::open(file);
  const int level = a.layout.levels.front();
  const MapWindow before = old->map_window(3, 2, level, 0, 0, 32, 32);
  const std::vector<Token> tokens = old->tokens();
  write_run(file, b, 3);
  EXPECT_EQ(old->summary().layout.prompt_tokens, 150);
  EXPECT_EQ(old->summary().complete_steps, 2);
  const MapWindow after = old->map_window(3, 2, level, 0, 0, 32, 32);
  ASSERT_GT(after.values.size(), 0u);
  EXPECT_EQ(after.values, before.values);
  const std::vector<Token> again = old->tokens();
  ASSERT_EQ(again.size(), tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(again[i].id, tokens[i].id);
  const auto now = CaptureFile::open(file);
  EXPECT_EQ(now->summary().layout.prompt_tokens, 200);
  EXPECT_EQ(now->summary().complete_steps, 3);
}

TEST(CaptureFile, WindowsClipAndSpanChunks) {
  Synthetic s = make_synthetic(300, 1, 2);
  align_pages(s);
  s.layout.levels = {0, 1};
  const fs::path file = work_dir() / "run.h5";
  CaptureWriter writer(file);
  RecordingSink rec;
  {
    CapturePipeline pipeline({&writer, &rec});
    feed(pipeline, s, 1);
    pipeline.finish({});
  }
  const auto f = CaptureFile::open(file);
  // A window across chunk boundaries equals the half rounding of the input map.
  const MapWindow w = f->map_window(3, 2, 0, 250, 100, 100, 190);
  EXPECT_EQ(w.rows, 50);   // clipped at 300
  EXPECT_EQ(w.cols, 190);
  const std::int64_t n = 300;
  for (std::int64_t r = 0; r < w.rows; ++r)
    for (std::int64_t c = 0; c < w.cols; ++c)
      ASSERT_EQ(w.values[r * w.cols + c], half_to_float(float_to_half(s.maps[1][(1 * n + 250 + r) * n + 100 + c])));
  EXPECT_EQ(f->map_window(3, 2, 0, 400, 0, 10, 10).rows, 0);
  EXPECT_THROW(f->map_window(3, 2, 5, 0, 0, 10, 10), Error);   // level not stored
  EXPECT_THROW(f->map_window(2, 2, 0, 0, 0, 10, 10), Error);   // layer not recorded
  EXPECT_THROW(f->map_window(3, 1, 0, 0, 0, 10, 10), Error);   // head not recorded
  EXPECT_THROW(f->row(0, 3, 0), Error);
  EXPECT_THROW(f->row(2, 3, 0), Error);
}

// A sink that takes chunks and notes each record it is given: its kind ('b' begin, 'm' map band,
// 'e' end of the prefill, 's' step, 'f' finish), its step, whether the capture's I/O thread
// handled it, and whether two threads were ever inside the sink at once.
struct ThreadNotingSink final : CaptureSink {
  struct Entry {
    char kind;
    std::int64_t step;
    bool on_io_thread;
  };
  std::vector<Entry> log;
  std::atomic<int> inside{0};
  bool overlapped = false;
  bool takes_chunks() const override { return true; }
  void note(char kind, std::int64_t step = 0) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    log.push_back({kind, step, std::string(name) == "luka-capture-io"});
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // room for an overlap to show
    inside.fetch_sub(1);
  }
  void begin(const Manifest&, const Layout&, const std::vector<Token>&, const std::vector<Segment>&) override { note('b'); }
  void map_rows(const MapRows&, const MapChunks*) override { note('m'); }
  void end_prefill() override { note('e'); }
  void step(const Step& s, const StepChunks*) override { note('s', s.step); }
  void finish(const std::vector<Token>&) override { note('f'); }
};

// Encoded records are queued without waking the I/O thread: a work item of the producer's next
// parallel region writes them (here on one of three threads), and end_prefill and finish wake
// the I/O thread for the rest. Records still reach the sinks one at a time and in order. With the
// I/O thread idle before the first band and the first step, which thread writes which record
// follows from the order of calls alone: every band but the last, and every step but the last,
// inline; the last band after end_prefill's wake and the last step after finish's, on the I/O
// thread.
TEST(CapturePipeline, EncodedRecordsAreWrittenByTheNextParallelRegionInOrder) {
  Synthetic s = make_synthetic(150, 4, 21);
  align_pages(s);
  ThreadNotingSink sink;
  {
    CapturePipeline pipeline({&sink});
    pipeline.set_parallel(three_threads);
    feed(pipeline, s, 0, /*drain_begin=*/true);
    pipeline.drain();  // the I/O thread idle, as between a real run's decode steps
    for (int st = 0; st < 4; ++st) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the model's time for a step
      pipeline.step(s.steps[static_cast<std::size_t>(st)]);
    }
    pipeline.finish(s.trailing);
  }
  EXPECT_FALSE(sink.overlapped);
  std::string kinds;
  std::vector<std::int64_t> steps;
  int bands_inline = 0, steps_inline = 0;
  for (const auto& e : sink.log) {
    kinds += e.kind;
    if (e.kind == 's') steps.push_back(e.step);
    bands_inline += e.kind == 'm' && !e.on_io_thread;
    steps_inline += e.kind == 's' && !e.on_io_thread;
  }
  const std::size_t bands = static_cast<std::size_t>(std::count(kinds.begin(), kinds.end(), 'm'));
  ASSERT_GT(bands, 3u);
  EXPECT_EQ(kinds, "b" + std::string(bands, 'm') + "essssf");
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4}));
  // Band k waits for band k + 1's region and step k for step k + 1's (steps 1-3 here).
  EXPECT_EQ(bands_inline, static_cast<int>(bands) - 1);
  EXPECT_EQ(steps_inline, 3);
  for (const auto& e : sink.log)
    if (e.kind != 'm' && e.kind != 's') EXPECT_TRUE(e.on_io_thread) << e.kind;
}

TEST(CaptureFile, UnfinishedFileReadsItsCompleteSteps) {
  Synthetic s = make_synthetic(40, 5, 3);
  align_pages(s);
  const fs::path file = work_dir() / "run.h5";
  auto writer = std::make_unique<CaptureWriter>(file);
  RecordingSink rec;
  {
    CapturePipeline pipeline({writer.get(), &rec});
    feed(pipeline, s, 3);
    pipeline.drain();
    // Read while the writer still has the file open (single-writer mode), under its .partial name.
    const auto f = CaptureFile::open(writer->partial_path());
    expect_same(*f, s, rec.bands, 3, false);
  }
  const fs::path partial = writer->partial_path();
  writer.reset();  // closes without finish(): like a run that stopped early
  EXPECT_FALSE(fs::exists(file));  // an unfinished run never takes the capture's name
  const auto f = CaptureFile::open(partial);
  expect_same(*f, s, rec.bands, 3, false);
}

void write_h5(const fs::path& file, const std::function<void(hid_t)>& body) {
  const hid_t f = H5Fcreate(file.string().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  body(f);
  H5Fclose(f);
}

void string_attr(hid_t obj, const char* name, const char* value) {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  const hid_t sp = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, &value);
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
}

void int_attr(hid_t obj, const char* name, long long v) {
  const hid_t sp = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, H5T_NATIVE_LLONG, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_LLONG, &v);
  H5Aclose(a);
  H5Sclose(sp);
}

std::string open_error(const fs::path& file) {
  try {
    CaptureFile::open(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small finished capture at `file` (40 tokens, 2 decode steps), returned as its bytes, for the
// tests that damage one field of it.
std::string written_capture_bytes(const fs::path& file) {
  Synthetic s = make_synthetic(40, 2, 5);
  align_pages(s);
  {
    CaptureWriter writer(file);
    CapturePipeline pipeline({&writer});
    feed(pipeline, s, 2);
    pipeline.finish({});
  }
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Opening `file` fails with an error, in a child process, so that a crash or a hang (20 s) fails
// the test instead of ending the suite.
void expect_refused_in_child(const fs::path& file) {
  EXPECT_EXIT(
      {
        ::alarm(20);
        std::exit(open_error(file).empty() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CaptureFile, BadFilesGiveClearErrors) {
  const fs::path dir = work_dir();
  EXPECT_NE(open_error(dir / "absent.h5").find("no such file"), std::string::npos);
  {
    std::ofstream(dir / "text.h5") << "just some text, not HDF5\n";
    EXPECT_NE(open_error(dir / "text.h5").find("not an HDF5 file"), std::string::npos);
  }
  write_h5(dir / "other.h5", [](hid_t f) { string_attr(f, "format", "something-else"); });
  EXPECT_NE(open_error(dir / "other.h5").find("not a LuKA capture"), std::string::npos);
  write_h5(dir / "future.h5", [](hid_t f) {
    string_attr(f, "format", "luka-capture");
    int_attr(f, "version", 99);
  });
  EXPECT_NE(open_error(dir / "future.h5").find("version 99 is not supported"), std::string::npos);
  write_h5(dir / "empty.h5", [](hid_t f) {
    string_attr(f, "format", "luka-capture");
    int_attr(f, "version", 1);
  });
  EXPECT_NE(open_error(dir / "empty.h5").find("missing group '/manifest'"), std::string::npos);

  // A real capture, truncated to a quarter and to its first 100 bytes.
  Synthetic s = make_synthetic(120, 3, 4);
  align_pages(s);
  const fs::path good = dir / "good.h5";
  {
    CaptureWriter writer(good);
    CapturePipeline pipeline({&writer});
    feed(pipeline, s, 3);
    pipeline.finish({});
  }
  for (const std::uintmax_t keep : {fs::file_size(good) / 4, std::uintmax_t{100}}) {
    const fs::path cut = dir / ("cut" + std::to_string(keep) + ".h5");
    fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    std::string err;
    try {
      const auto f = CaptureFile::open(cut);
      // Opening may succeed when the metadata survived; reading the data must then fail cleanly.
      for (const int layer : {1, 3}) {
        f->tokens();
        f->map_window(layer, 0, s.layout.levels.front(), 0, 0, 120, 120);
        for (int st = 1; st <= f->summary().complete_steps; ++st) f->row(st, layer, 0);
      }
    } catch (const Error& e) {
      err = e.what();
    }
    EXPECT_NE(err.find(cut.string()), std::string::npos) << "truncated to " << keep << ": " << err;
  }

  // Per-step arrays missing or of the wrong shape; and the earlier layout, one /decode group per layer.
  const auto edited = [&](const std::string& file, const std::function<void(hid_t)>& edit) {
    const fs::path p = dir / file;
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(f, 0);
    edit(f);
    H5Fclose(f);
    return open_error(p);
  };
  EXPECT_NE(edited("no_cover.h5", [](hid_t f) { H5Ldelete(f, "decode/cover", H5P_DEFAULT); }).find("missing dataset '/decode/cover'"),
            std::string::npos);
  const std::string shape = edited("short_layers.h5", [](hid_t f) {
    H5Ldelete(f, "decode/mode", H5P_DEFAULT);
    const hsize_t dims[2] = {3, 1};  // one layer where two are recorded
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    H5Dclose(H5Dcreate2(f, "decode/mode", H5T_STD_I8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(space);
  });
  EXPECT_NE(shape.find("'/decode/mode' does not have the recorded layers and heads"), std::string::npos) << shape;
  const std::string old = edited("per_layer.h5", [](hid_t f) {
    for (const char* part : {"mode", "paged_end", "seconds", "cover_size", "fidelity", "effective", "dense", "cover", "page_state", "summary_mass"})
      H5Ldelete(f, (std::string("decode/") + part).c_str(), H5P_DEFAULT);
    for (const char* group : {"decode/layer_01", "decode/layer_03"}) H5Gclose(H5Gcreate2(f, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  });
  EXPECT_NE(old.find("written by an earlier build, with one /decode group per layer"), std::string::npos) << old;

  // Captures from before the Kascade mode have neither of its per-step datasets: they open and read
  // -1 (no source, no head map); one without the other is damage.
  {
    const fs::path p = dir / "before_kascade.h5";
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    for (const char* part : {"decode/kascade_source", "decode/kascade_head"}) EXPECT_GE(H5Ldelete(f, part, H5P_DEFAULT), 0);
    H5Fclose(f);
    const auto before = CaptureFile::open(p);
    const StepMetrics m = before->metrics(1, 1);
    EXPECT_EQ(m.kascade_source, -1);
    EXPECT_EQ(m.kascade_head, std::vector<std::int32_t>(before->summary().layout.heads.size(), -1));
  }
  const std::string half = edited("half_kascade.h5", [](hid_t f) { H5Ldelete(f, "decode/kascade_head", H5P_DEFAULT); });
  EXPECT_NE(half.find("'/decode/kascade_source' and '/decode/kascade_head' come together"), std::string::npos) << half;

  // A step's T beyond the recorded tokens (it sizes the rows read for the step).
  const std::string huge = edited("huge_t.h5", [](hid_t f) { write_int64_at(f, "decode/tokens", 1, std::int64_t{1} << 50); });
  EXPECT_NE(huge.find("damaged capture: decode step 2 attends 1125899906842624 tokens"), std::string::npos) << huge;
}

// Segments and pages are spans of the recorded tokens, checked when the capture opens: a segment
// that began after it ended gave `luka inspect --topics` numbers, exit 0.
TEST(CaptureFile, TokenSpansAreCheckedWhenTheCaptureOpens) {
  const fs::path dir = work_dir();
  Synthetic s = make_synthetic(120, 3, 4);
  align_pages(s);
  const fs::path good = dir / "spans.h5";
  {
    CaptureWriter writer(good);
    CapturePipeline pipeline({&writer});
    feed(pipeline, s, 3);
    pipeline.finish({});
  }
  ASSERT_EQ(open_error(good), "");
  const auto edited = [&](const std::string& file, const char* path, hsize_t index, std::int64_t value) {
    const fs::path p = dir / file;
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(f, 0);
    write_int64_at(f, path, index, value);
    H5Fclose(f);
    return open_error(p);
  };
  // Segment 1 is [60, 120): it begins after it ends, then ends past the tokens, then begins before 0.
  std::string e = edited("segment_backwards.h5", "segments/begin", 1, 130);
  EXPECT_NE(e.find("damaged capture: segment 1 spans tokens [130, 120), not a span of the"), std::string::npos) << e;
  e = edited("segment_past.h5", "segments/end", 1, 500);
  EXPECT_NE(e.find("damaged capture: segment 1 spans tokens [60, 500)"), std::string::npos) << e;
  e = edited("segment_negative.h5", "segments/begin", 0, -3);
  EXPECT_NE(e.find("damaged capture: segment 0 spans tokens [-3, 60)"), std::string::npos) << e;
  e = edited("page_past.h5", "pages/layer_01/end", 0, 4000);
  EXPECT_NE(e.find("damaged capture: layer 1 page 0 spans tokens ["), std::string::npos) << e;
  EXPECT_NE(e.find(", 4000) made at step"), std::string::npos) << e;
}

// A metadata block whose checksum fails is an error at once. Single-writer-read mode rereads such
// a block with doubling sleeps, and with HDF5's default of 100 attempts the open never ended; it
// runs in a child process here, so a hang fails the test in seconds.
TEST(CaptureFile, DamagedMetadataFailsAtOnce) {
  const fs::path damaged = work_dir() / "damaged.h5";
  std::string bytes = written_capture_bytes(damaged);
  const std::size_t at = bytes.find("tool_version");  // a manifest attribute's name, in a checksummed heap block
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x20;
  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
  expect_refused_in_child(damaged);
  EXPECT_NE(open_error(damaged).find(damaged.string()), std::string::npos);
}

// One global heap object's size field made larger than its collection: HDF5 1.10 would copy that
// many bytes when the manifest's string attributes are read (a crash); the reader refuses the file
// before HDF5 opens it. In a child process, so that the crash it guards against fails the test.
TEST(CaptureFile, DamagedGlobalHeapIsRefusedBeforeHdf5ReadsIt) {
  const fs::path damaged = work_dir() / "heap.h5";
  std::string bytes = written_capture_bytes(damaged);
  EXPECT_EQ(check_global_heaps(damaged), std::nullopt);  // the writer's own heap is whole
  const std::size_t at = bytes.find("GCOL");
  ASSERT_NE(at, std::string::npos);
  ASSERT_LT(at, kHeapScanBytes);
  // The first object's size (after the 16-byte collection header, its index, count and reserved).
  const std::uint64_t huge = 0x66696e61;  // the size fuzz_capture_reader found
  std::memcpy(&bytes[at + 16 + 8], &huge, sizeof huge);
  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
  expect_refused_in_child(damaged);
  const std::string error = open_error(damaged);
  EXPECT_NE(error.find(damaged.string()), std::string::npos) << error;
  EXPECT_NE(error.find("damaged HDF5 file: global heap at byte " + std::to_string(at) + ": object 1 claims 1718185569 bytes"),
            std::string::npos)
      << error;
}

// The read-attempt count only changes how long a damaged block is retried: a whole file reads the
// same with one attempt, a damaged one is refused the same way, and no attempts at all is an error.
TEST(CaptureFile, OneMetadataReadAttemptReadsTheSame) {
  const fs::path file = work_dir() / "attempts.h5";
  std::string bytes = written_capture_bytes(file);
  {  // closed before the file is damaged: HDF5 would keep reading its open copy
    const auto one = CaptureFile::open(file, 1);
    const auto all = CaptureFile::open(file);
    EXPECT_EQ(one->summary().complete_steps, all->summary().complete_steps);
    EXPECT_EQ(one->tokens().size(), all->tokens().size());
    EXPECT_THROW(CaptureFile::open(file, 0), Error);
  }
  const std::size_t at = bytes.find("tool_version");
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x20;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  std::string error;
  try {
    CaptureFile::open(file, 1);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error, open_error(file));
  EXPECT_FALSE(error.empty());
}

// The writer's heap with its free space's size set to 0: HDF5 1.10 loading the collection would
// read that header for ever (a hang in `luka inspect`, found by fuzz_capture_reader); the reader
// refuses the file before HDF5 opens it. In a child process, so that a hang fails the test.
TEST(CaptureFile, GlobalHeapFreeSpaceOfZeroBytesIsRefusedBeforeHdf5ReadsIt) {
  const fs::path damaged = work_dir() / "free.h5";
  std::string bytes = written_capture_bytes(damaged);
  const std::size_t at = bytes.find("GCOL");
  ASSERT_NE(at, std::string::npos);
  const auto field = [&](std::size_t offset, int n) {
    std::uint64_t v = 0;
    std::memcpy(&v, &bytes[offset], static_cast<std::size_t>(n));
    return v;
  };
  const std::uint64_t size = field(at + 8, 8);
  std::size_t pos = 16;  // the objects, padded to 8 bytes, up to the free space (index 0)
  while (pos + 16 <= size && field(at + pos, 2) != 0) pos += 16 + (field(at + pos + 8, 8) + 7) / 8 * 8;
  ASSERT_LE(pos + 16, size) << "the writer's collection has no free space to damage";
  ASSERT_EQ(field(at + pos + 8, 8), size - pos);  // HDF5 writes it up to the collection's end
  const std::uint64_t zero = 0;
  std::memcpy(&bytes[at + pos + 8], &zero, sizeof zero);
  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
  expect_refused_in_child(damaged);
  const std::string error = open_error(damaged);
  EXPECT_NE(error.find(damaged.string()), std::string::npos) << error;
  EXPECT_NE(error.find("damaged HDF5 file: global heap at byte " + std::to_string(at) + ": its free space at byte " +
                       std::to_string(pos) + " claims 0 bytes"),
            std::string::npos)
      << error;
}

// A segment label's stored heap reference (raw data, no checksum) naming an object its heap lacks,
// or more bytes than its object holds: HDF5 1.10 would read through it (a crash); segments() says
// which string is damaged.
TEST(CaptureFile, DamagedStringReferenceIsRefusedBeforeHdf5ReadsIt) {
  const fs::path dir = work_dir();
  Synthetic s = make_synthetic(40, 2, 5);
  align_pages(s);
  const fs::path file = dir / "labels.h5";
  {
    CaptureWriter writer(file);
    CapturePipeline pipeline({&writer});
    feed(pipeline, s, 2);
    pipeline.finish({});
  }
  haddr_t offset = HADDR_UNDEF;
  {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, "segments/label", H5P_DEFAULT);
    offset = H5Dget_offset(ds);
    H5Dclose(ds);
    H5Fclose(f);
  }
  ASSERT_NE(offset, HADDR_UNDEF);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Element 1 ("Topic B — β", 13 bytes): length (4), collection address (8), object index (4).
  std::uint32_t length = 0, index = 0;
  std::uint64_t heap = 0;
  std::memcpy(&length, &bytes[offset + 16], 4);
  std::memcpy(&heap, &bytes[offset + 16 + 4], 8);
  std::memcpy(&index, &bytes[offset + 16 + 12], 4);
  ASSERT_EQ(length, std::string("Topic B — β").size());
  std::string damaged = bytes;
  const std::uint32_t absent = 999;
  std::memcpy(&damaged[offset + 16 + 12], &absent, 4);
  std::string error;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
  ASSERT_EXIT(
      {
        ::alarm(20);
        try {
          (void)CaptureFile::open(file)->segments();
        } catch (const Error&) {
          std::exit(0);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "");
  try {
    (void)CaptureFile::open(file)->segments();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("damaged capture: dataset 'label': string 1: the global heap at byte " + std::to_string(heap) +
                       " has no object 999"),
            std::string::npos)
      << error;

  damaged = bytes;
  const std::uint32_t longer = length + 100;
  std::memcpy(&damaged[offset + 16], &longer, 4);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
  error.clear();
  try {
    (void)CaptureFile::open(file)->segments();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("string 1: " + std::to_string(longer) + " bytes long, its heap object holds " + std::to_string(length)),
            std::string::npos)
      << error;

  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;  // the undamaged file reads
  EXPECT_EQ(CaptureFile::open(file)->segments().at(1).label, "Topic B — β");
}

// The collection walk on hand-made collections: objects padded to 8 bytes, the free space last.
TEST(CaptureFile, HeapCollectionWalk) {
  std::vector<std::uint8_t> c(4096, 0);
  const auto put = [&](std::size_t at, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) c[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  std::memcpy(c.data(), "GCOL\1\0\0\0", 8);
  put(8, 4096, 8);
  put(16, 1, 2), put(16 + 8, 13, 8);                 // object 1: 13 bytes, padded to 16
  put(48, 2, 2), put(48 + 8, 4096 - 48 - 16, 8);     // object 2: up to the end
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), std::nullopt);
  put(48 + 8, 4096 - 48 - 16 + 1, 8);                // one byte past the end
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), "object 2 claims 4033 bytes, 4032 are left in the collection");
  put(48, 0, 2), put(48 + 8, 4096 - 48, 8);          // the free space, its header counted, to the end
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), std::nullopt);
  put(48 + 8, 4096 - 48 + 8, 8);
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), "its free space claims 4056 bytes, 4048 are left in the collection");
  // Free space of 0 bytes: HDF5 1.10 would read its header for ever.
  put(48 + 8, 0, 8);
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), "its free space at byte 48 claims 0 bytes (HDF5 would never read past it)");
  // Free space that stops short is read past, as HDF5 does: what follows it is checked too.
  put(48 + 8, 32, 8);
  put(80, 3, 2), put(80 + 8, 4096 - 80 - 16, 8);     // object 3: from the free space's end to the collection's
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), std::nullopt);
  put(80 + 8, 4096 - 80 - 16 + 8, 8);
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), "object 3 claims 4008 bytes, 4000 are left in the collection");
  put(80, 0, 2), put(80 + 8, 0, 8);                  // a second free space, of 0 bytes
  EXPECT_EQ(heap_collection_damage(c.data(), c.size()), "its free space at byte 80 claims 0 bytes (HDF5 would never read past it)");
  EXPECT_EQ(heap_collection_damage(c.data(), 2048), "the collection is 2048 bytes (at least 4096)");
}

TEST(RecordSpec, ParsesAndRejects) {
  const RecordSpec a = RecordSpec::parse("layers=0-2,5;heads=1;parts=maps,covers;map_cap=512;map_min=32;deflate=none");
  EXPECT_EQ(a.layers, (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(a.heads, (std::vector<int>{1}));
  EXPECT_TRUE(a.maps);
  EXPECT_FALSE(a.rows);
  EXPECT_TRUE(a.covers);
  EXPECT_EQ(a.map_cap, 512);
  EXPECT_EQ(a.deflate, -1);
  EXPECT_EQ(RecordSpec::parse(a.to_string()).to_string(), a.to_string());
  EXPECT_FALSE(RecordSpec::parse("maps").rows);
  EXPECT_TRUE(RecordSpec::parse("all").rows);
  for (const char* bad : {"layers=x", "parts=pictures", "colour=red", "deflate=12", "map_cap=0", "layers=3-1", "nonsense"})
    EXPECT_THROW(RecordSpec::parse(bad), Error) << bad;
}

// layers= and heads= are layer lists (core/util/layer_range.h), the grammar of --set: both
// separators, repeats merged; the spec prints them in the shortest spelling.
TEST(RecordSpec, LayersAndHeadsAreLayerLists) {
  for (const std::string list : {"0-2,5", "0-2|5", "5,0-2", "0,1,2,5", "0|1|2|5", " 0 - 2 | 5 ", "0-2,2,5,1"}) {
    const RecordSpec r = RecordSpec::parse("layers=" + list + ";heads=" + list);
    EXPECT_EQ(r.layers, (std::vector<int>{0, 1, 2, 5})) << list;
    EXPECT_EQ(r.heads, (std::vector<int>{0, 1, 2, 5})) << list;
    EXPECT_EQ(r.to_string().substr(0, 24), "layers=0-2,5;heads=0-2,5") << list;
  }
  EXPECT_TRUE(RecordSpec::parse("layers=all").layers.empty());  // every layer
  const auto error_of = [](const std::string& spec) -> std::string {
    try {
      RecordSpec::parse(spec);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of("layers=3-1"), "--record: layer range '3-1' runs backwards (write 1-3)");
  EXPECT_EQ(error_of("heads=0,,2"),
            "--record: empty piece in head list '0,,2' (expected N, A-B, several separated by ',' or '|', or all)");
  EXPECT_EQ(error_of("layers=-1"), "--record: layer range '-1' is out of range: layers count from 0, up to 1048575");
}

}  // namespace
}  // namespace luka::capture

// Saving the Studio's view as a capture file and opening it again, without a window: a live run
// of the default model (lined, clustered and dense layers, the dense shadow on some) saved through
// RunController::save_capture reads back through CaptureFile bit for bit — tokens, segments, every
// stored map level, decode rows, dense rows, covers, page tables and states, summary mass, refined
// pages, heavy hitters, fidelity and step metrics — and h5py reads the file (check_capture.py). A
// paused run saves its complete steps; a file saved again from the opened file is the same
// capture; a save that cannot be written says why and leaves nothing behind. The recent-files
// list survives a missing or corrupt file and keeps its order without duplicates.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "app/studio/data/recent_files.h"
#include "app/studio/data/run_controller.h"
#include "captures/capture.h"
#include "captures/reader.h"
#include "captures/save_view.h"
#include "core/util/error.h"
#include "tests/process_util.h"

namespace luka::studio {
namespace {

namespace fs = std::filesystem;

const fs::path kModel = fs::path(LUKA_SOURCE_DIR) / "models" / "default";

using luka::test::wait_for;

// Same bits (NaN payloads and signed zeros included), not just equal values.
template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  if (!a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) != 0) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return ::testing::AssertionFailure() << "first difference at " << i << ": " << +a[i] << " vs " << +b[i];
  }
  return ::testing::AssertionSuccess();
}

// The dense shadow's row, or empty where the view says the shadow was off.
std::vector<float> dense_or_empty(const capture::CaptureView& v, std::int64_t step, int layer, int head) {
  try {
    return v.dense_row(step, layer, head);
  } catch (const std::exception&) {
    return {};
  }
}

struct Counts {
  std::int64_t map_values = 0, rows = 0, dense_rows = 0, refined = 0, heavy = 0, pages = 0, fidelity = 0;
};

// Every record the reader exposes, compared between two views; returns what was seen, so the
// caller can check the run exercised each kind.
Counts expect_same_capture(const capture::CaptureView& a, const capture::CaptureView& b) {
  Counts n;
  const capture::Summary sa = a.summary(), sb = b.summary();
  const capture::Layout& la = sa.layout;
  const capture::Layout& lb = sb.layout;
  EXPECT_EQ(sa.complete_steps, sb.complete_steps);
  EXPECT_EQ(sa.num_tokens, sb.num_tokens);
  EXPECT_TRUE(sb.finished);
  const auto& ma = sa.manifest;
  const auto& mb = sb.manifest;
  for (const auto& [x, y] : {std::pair{&ma.model_path, &mb.model_path}, {&ma.architecture, &mb.architecture}, {&ma.model_config, &mb.model_config},
                             {&ma.weights_hash, &mb.weights_hash}, {&ma.tokenizer_hash, &mb.tokenizer_hash}, {&ma.luka_config, &mb.luka_config},
                             {&ma.generation, &mb.generation}, {&ma.device, &mb.device}, {&ma.dtype, &mb.dtype}, {&ma.tool_version, &mb.tool_version},
                             {&ma.git_revision, &mb.git_revision}, {&ma.created, &mb.created}, {&ma.record, &mb.record}})
    EXPECT_EQ(*x, *y);
  EXPECT_EQ(ma.seed, mb.seed);
  EXPECT_EQ(la.num_layers, lb.num_layers);
  EXPECT_EQ(la.num_heads, lb.num_heads);
  EXPECT_EQ(la.num_kv_heads, lb.num_kv_heads);
  EXPECT_EQ(la.layers, lb.layers);
  EXPECT_EQ(la.heads, lb.heads);
  EXPECT_EQ(la.page_size, lb.page_size);
  EXPECT_EQ(la.prompt_tokens, lb.prompt_tokens);
  EXPECT_EQ(la.levels, lb.levels);
  EXPECT_EQ(la.rows, lb.rows);
  EXPECT_EQ(la.covers, lb.covers);
  EXPECT_EQ(la.deflate, lb.deflate);

  const auto ta = a.tokens(), tb = b.tokens();
  EXPECT_EQ(ta.size(), tb.size());
  for (std::size_t i = 0; i < std::min(ta.size(), tb.size()); ++i) {
    EXPECT_EQ(ta[i].id, tb[i].id) << "token " << i;
    EXPECT_EQ(ta[i].piece, tb[i].piece) << "token " << i;
    EXPECT_EQ(ta[i].generated, tb[i].generated) << "token " << i;
    EXPECT_EQ(ta[i].segment, tb[i].segment) << "token " << i;
    EXPECT_TRUE(same_bits(std::vector<float>{ta[i].prob}, std::vector<float>{tb[i].prob})) << "token " << i;
  }
  const auto ga = a.segments(), gb = b.segments();
  EXPECT_EQ(ga.size(), gb.size());
  for (std::size_t i = 0; i < std::min(ga.size(), gb.size()); ++i) {
    EXPECT_EQ(ga[i].label, gb[i].label);
    EXPECT_EQ(ga[i].colour, gb[i].colour);
    EXPECT_EQ(ga[i].begin, gb[i].begin);
    EXPECT_EQ(ga[i].end, gb[i].end);
  }

  for (const int layer : la.layers) {
    for (const int level : la.levels) {
      const std::int64_t s = capture::level_size(la.prompt_tokens, level);
      for (const int head : la.heads) {
        const capture::MapWindow wa = a.map_window(layer, head, level, 0, 0, s, s), wb = b.map_window(layer, head, level, 0, 0, s, s);
        EXPECT_EQ(wa.rows, wb.rows);
        EXPECT_EQ(wa.cols, wb.cols);
        EXPECT_TRUE(same_bits(wa.values, wb.values)) << "map of layer " << layer << " head " << head << " level " << level;
        for (const float v : wa.values) n.map_values += v != 0;
      }
    }
    const auto pa = a.pages(layer), pb = b.pages(layer);
    EXPECT_EQ(pa.size(), pb.size()) << "pages of layer " << layer;
    for (std::size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
      EXPECT_EQ(pa[i].start, pb[i].start);
      EXPECT_EQ(pa[i].end, pb[i].end);
      EXPECT_EQ(pa[i].created_step, pb[i].created_step);
    }
    n.pages += static_cast<std::int64_t>(pa.size());
    for (std::int64_t step = 1; step <= sa.complete_steps; ++step) {
      const capture::StepMetrics xa = a.metrics(step, layer), xb = b.metrics(step, layer);
      const std::string at = "step " + std::to_string(step) + " layer " + std::to_string(layer);
      EXPECT_EQ(xa.mode, xb.mode) << at;
      EXPECT_EQ(xa.tokens, xb.tokens) << at;
      EXPECT_EQ(xa.paged_end, xb.paged_end) << at;
      EXPECT_TRUE(same_bits(std::vector<double>{xa.seconds}, std::vector<double>{xb.seconds})) << at;
      EXPECT_EQ(xa.cover_size, xb.cover_size) << at;
      EXPECT_TRUE(same_bits(xa.fidelity, xb.fidelity)) << at;
      for (const float f : xa.fidelity) n.fidelity += !std::isnan(f);
      for (const int head : la.heads) {
        const std::string ah = at + " head " + std::to_string(head);
        const auto ra = a.row(step, layer, head);
        EXPECT_EQ(static_cast<std::int64_t>(ra.size()), xa.tokens) << ah;
        EXPECT_TRUE(same_bits(ra, b.row(step, layer, head))) << ah;
        const auto da = dense_or_empty(a, step, layer, head);
        EXPECT_TRUE(same_bits(da, dense_or_empty(b, step, layer, head))) << ah;
        n.dense_rows += !da.empty();
        EXPECT_TRUE(same_bits(a.cover(step, layer, head), b.cover(step, layer, head))) << ah;
        EXPECT_TRUE(same_bits(a.page_states(step, layer, head), b.page_states(step, layer, head))) << ah;
        EXPECT_TRUE(same_bits(a.summary_mass(step, layer, head), b.summary_mass(step, layer, head))) << ah;
        const auto refined = a.refined_pages(step, layer, head), heavy = a.heavy_hitters(step, layer, head);
        EXPECT_EQ(refined, b.refined_pages(step, layer, head)) << ah;
        EXPECT_EQ(heavy, b.heavy_hitters(step, layer, head)) << ah;
        n.refined += static_cast<std::int64_t>(refined.size());
        n.heavy += static_cast<std::int64_t>(heavy.size());
        ++n.rows;
      }
    }
  }
  return n;
}

class SaveOpen : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel)) GTEST_SKIP() << "no model at " << kModel << " (scripts/setup.sh installs the default one)";
    dir_ = luka::test::test_dir("studio_save_open");
    session_.load_model(kModel, LoadOptions{}, parse_device("cpu"));
    ASSERT_TRUE(wait_for([&] { return !session_.busy(); }, 120)) << "load timed out";
    ASSERT_EQ(session_.status().state, RunState::kReady) << session_.status().message;
    // Every kind of record: lined (heavy hitters) and clustered (pages, refinement) layers with
    // short windows and tails, so a short prompt has them, and the dense shadow on two layers.
    LukaConfig cfg = session_.config();
    for (const char* o : {"layer=2,mode=lined,window=8,rho=0.25,dense_shadow=true", "layer=3,mode=clustered,page_size=8,tail=16,top_k=2,dense_shadow=true",
                          "layer=4,mode=clustered,page_size=4,tail=8,top_k=1"})
      cfg.apply_override(o);
    session_.set_config(cfg);
    request_.prompt.pattern = "ABA";
    request_.prompt.segments = {{"Tides", "#1f77b4", "The tide rises twice a day along the coast, pulled by the moon."},
                                {"Bread", "#ff7f0e", "Knead the dough for ten minutes, then let it rest."},
                                {"Tides", "#1f77b4", "Spring tides follow the new and the full moon."}};
  }

  // Saves the session's view to `path` and waits for the outcome.
  Status save(const fs::path& path) {
    session_.save_capture(path);
    EXPECT_TRUE(wait_for([&] { return !session_.status().saving; }, 120)) << "save timed out";
    return session_.status();
  }

  fs::path dir_;
  RunController session_;
  RunRequest request_;
};

TEST_F(SaveOpen, ALiveRunSavedAndOpenedReadsBackBitForBit) {
  request_.max_new_tokens = 8;
  session_.run(request_);
  ASSERT_TRUE(wait_for([&] { return !session_.busy(); }, 300)) << session_.status().message;
  ASSERT_EQ(session_.status().steps_done, 7) << session_.status().message;
  const auto live = session_.view();
  ASSERT_TRUE(live);

  const fs::path file = dir_ / "saved.h5";
  const Status s = save(file);
  ASSERT_FALSE(s.save_failed) << s.save_message;
  EXPECT_EQ(s.saved_path, file.string());
  EXPECT_NE(s.save_message.find("saved saved.h5 (7 steps"), std::string::npos) << s.save_message;
  EXPECT_DOUBLE_EQ(s.save_progress, 1.0);
  EXPECT_FALSE(fs::exists(file.string() + ".partial"));
  EXPECT_FALSE(fs::exists(file.string() + ".lock"));

  const auto opened = capture::CaptureFile::open(file);
  const Counts n = expect_same_capture(*live, *opened);
  // The run had each kind of record, so the comparison covered them.
  EXPECT_GT(n.map_values, 1000);
  EXPECT_GT(n.rows, 7 * 30 * 9 - 1);
  EXPECT_EQ(n.dense_rows, 2 * 7 * 9);  // two shadowed layers, seven steps, nine heads
  EXPECT_GT(n.fidelity, 0);
  EXPECT_GT(n.pages, 0);
  EXPECT_GT(n.refined, 0);
  EXPECT_GT(n.heavy, 0);

  // Opened in the Studio: replay of the file, its tokens and segments.
  session_.open_capture(file);
  ASSERT_TRUE(wait_for([&] { return session_.status().replay && !session_.busy(); }, 60)) << session_.status().message;
  EXPECT_EQ(session_.status().capture, file.string());
  EXPECT_EQ(session_.view()->segments().size(), 3u);
  expect_same_capture(*live, *session_.view());

  // Saved again from the opened file (replay → file): the same capture.
  const fs::path again = dir_ / "again.h5";
  const Status s2 = save(again);
  ASSERT_FALSE(s2.save_failed) << s2.save_message;
  expect_same_capture(*opened, *capture::CaptureFile::open(again));

  // h5py reads it as documented, with no help from the tool.
  if (!fs::exists(LUKA_PYTHON)) GTEST_SKIP() << "python not found at " << LUKA_PYTHON;
  const auto py = luka::test::run_shell(luka::test::quote(LUKA_PYTHON) + " " +
                                            luka::test::quote((fs::path(LUKA_SOURCE_DIR) / "tests/captures/check_capture.py").string()) + " " +
                                            luka::test::quote(file.string()) + " --expect-steps 7 --expect-finished 1",
                                        dir_);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;

  // Leaving the replay: no view, the run controls back.
  session_.leave_replay();
  ASSERT_TRUE(wait_for([&] { return !session_.status().replay && !session_.busy(); }, 60));
  EXPECT_FALSE(session_.view());
  EXPECT_EQ(session_.status().state, RunState::kReady);
}

TEST_F(SaveOpen, APausedRunSavesItsCompleteStepsAndBadPathsFailCleanly) {
  request_.max_new_tokens = 12;
  request_.start_paused = true;
  session_.run(request_);
  ASSERT_TRUE(wait_for([&] { return session_.status().state == RunState::kPaused || session_.status().state == RunState::kError; }, 120));
  session_.step();
  session_.step();
  ASSERT_TRUE(wait_for([&] { return session_.status().steps_done == 2 && session_.status().state == RunState::kPaused; }, 60));
  const fs::path file = dir_ / "paused.h5";
  const Status s = save(file);
  ASSERT_FALSE(s.save_failed) << s.save_message;
  const auto opened = capture::CaptureFile::open(file);
  EXPECT_EQ(opened->summary().complete_steps, 2);
  expect_same_capture(*session_.view(), *opened);

  // A folder that does not exist: the message names the file; no .partial is left anywhere.
  const fs::path bad = dir_ / "no such folder" / "x.h5";
  const Status b = save(bad);
  EXPECT_TRUE(b.save_failed);
  EXPECT_NE(b.save_message.find("x.h5"), std::string::npos) << b.save_message;
  EXPECT_FALSE(fs::exists(bad.string() + ".partial"));
  // A file already at the path stays whole when a save over it fails: here, one cancelled.
  capture::SaveOptions cancelled;
  std::atomic<bool> stop{true};
  cancelled.cancel = &stop;
  const auto before = fs::file_size(file);
  EXPECT_THROW(capture::save_view(*session_.view(), file, cancelled), Error);
  EXPECT_EQ(fs::file_size(file), before);
  EXPECT_FALSE(fs::exists(file.string() + ".partial"));
  EXPECT_EQ(capture::CaptureFile::open(file)->summary().complete_steps, 2);

  session_.stop();
  ASSERT_TRUE(wait_for([&] { return !session_.busy(); }, 120));
}

TEST(SaveOpenNoModel, NothingToSaveIsRefused) {
  RunController s;
  s.save_capture(luka::test::test_dir("studio_save_open") / "x.h5");
  EXPECT_TRUE(s.status().save_failed);
  EXPECT_NE(s.status().save_message.find("nothing to save"), std::string::npos) << s.status().save_message;
}

// [SECTION] recent files

TEST(RecentFiles, MissingOrCorruptFilesReadAsAnEmptyList) {
  const fs::path d = luka::test::test_dir("studio_recent");
  RecentFiles missing(d / "none" / "recent.json");
  EXPECT_TRUE(missing.paths().empty());
  EXPECT_TRUE(missing.warning().empty());

  for (const std::string text : {"{not json", "[1, 2]", "{\"recent\": 3}", ""}) {
    std::ofstream(d / "bad.json") << text;
    RecentFiles bad(d / "bad.json");
    EXPECT_TRUE(bad.paths().empty()) << text;
    EXPECT_NE(bad.warning().find("bad.json"), std::string::npos) << text << ": " << bad.warning();
    bad.add(d / "a.h5");  // and the next change writes a good file over it
    EXPECT_TRUE(bad.warning().empty()) << bad.warning();
    EXPECT_EQ(RecentFiles(d / "bad.json").paths(), std::vector<std::string>{(d / "a.h5").string()});
  }
  // Entries that are not paths are skipped, the rest kept.
  std::ofstream(d / "mixed.json") << R"({"recent": ["/x/a.h5", 7, null, "", "/x/b.h5", "/x/a.h5"]})";
  EXPECT_EQ(RecentFiles(d / "mixed.json").paths(), (std::vector<std::string>{"/x/a.h5", "/x/b.h5"}));
}

TEST(RecentFiles, NewestFirstWithoutDuplicatesUpToTheLimit) {
  const fs::path d = luka::test::test_dir("studio_recent");
  const fs::path f = d / "cfg" / "recent.json";
  {
    RecentFiles r(f, 3);
    r.add(d / "a.h5");
    r.add(d / "b.h5");
    r.add(d / "sub" / ".." / "a.h5");  // the same file: moves to the front
    EXPECT_EQ(r.paths(), (std::vector<std::string>{(d / "a.h5").string(), (d / "b.h5").string()}));
    r.add(d / "c.h5");
    r.add(d / "d.h5");  // over the limit: the oldest goes
    EXPECT_EQ(r.paths(), (std::vector<std::string>{(d / "d.h5").string(), (d / "c.h5").string(), (d / "a.h5").string()}));
  }
  RecentFiles back(f, 3);  // persisted
  EXPECT_EQ(back.paths(), (std::vector<std::string>{(d / "d.h5").string(), (d / "c.h5").string(), (d / "a.h5").string()}));
  back.remove(d / "c.h5");
  EXPECT_EQ(RecentFiles(f, 3).paths(), (std::vector<std::string>{(d / "d.h5").string(), (d / "a.h5").string()}));
  // Relative paths are stored absolute.
  RecentFiles rel(d / "rel.json");
  rel.add("relative.h5");
  EXPECT_EQ(rel.paths(), std::vector<std::string>{(fs::current_path() / "relative.h5").string()});
}

TEST(RecentFiles, LivesUnderXdgConfigHomeOrHome) {
  const char* old_xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string saved = old_xdg ? old_xdg : "";
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("XDG_CONFIG_HOME", "/tmp/cfg-test", 1);
  EXPECT_EQ(RecentFiles::default_file(), fs::path("/tmp/cfg-test/luka-studio/recent.json"));
  ::setenv("XDG_CONFIG_HOME", "relative", 1);  // not absolute: ignored, as the XDG spec says
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(RecentFiles::default_file(), fs::path("/home/someone/.config/luka-studio/recent.json"));
  ::setenv("HOME", home.c_str(), 1);
  if (old_xdg) ::setenv("XDG_CONFIG_HOME", saved.c_str(), 1);
  else ::unsetenv("XDG_CONFIG_HOME");
}

}  // namespace
}  // namespace luka::studio

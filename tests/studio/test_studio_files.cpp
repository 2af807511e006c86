// Capture files in the Studio under Xvfb, driven by --script: a live run saved with "Save capture
// as" (save_capture), opened with "Open capture" (open_capture), replayed with the capture's own
// prompt and segments in the prompt panel (not the editor's prompt) and its run and mode controls
// off until the replay is left; the recent-files list (kept under XDG_CONFIG_HOME, here a test
// folder) records both, and a corrupt list neither stops the Studio nor survives the next save.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "captures/reader.h"
#include "tests/process_util.h"
#include "tests/studio/screenshot.h"
#include "viz/png.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = LUKA_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "default";

using luka::test::quote;
using luka::test::read_file;
using luka::test::RunResult;

fs::path work_dir() { return luka::test::test_dir("studio_files"); }

bool have_xvfb() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

// As in test_studio.cpp: Mesa's GL driver leaks a little at exit, so LeakSanitizer is off for the window.
#if defined(__SANITIZE_ADDRESS__)
const std::string kStudioEnv = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" ";
#else
const std::string kStudioEnv;
#endif

// The Studio on `prompt_file` with the recent-files list under `config`.
RunResult studio(const fs::path& prompt_file, const fs::path& config, const std::string& script, const std::string& size = "1280x800") {
  const fs::path s = work_dir() / "actions.script";
  std::ofstream(s) << script;
  return luka::test::run_shell("env -u LUKA_MODEL XDG_CONFIG_HOME=" + quote(config.string()) + " " + kStudioEnv +
                                   "xvfb-run -a -s '-screen 0 " + size + "x24' " + quote(LUKA_CLI_PATH) + " studio --size " + size +
                                   " --prompt-file " + quote(prompt_file.string()) + " --script " + quote(s.string()),
                               work_dir());
}

// A short interwoven prompt whose topic colours appear nowhere else in the Studio's UI.
fs::path write_prompt(const fs::path& dir) {
  const fs::path p = dir / "harbour.json";
  std::ofstream(p) << R"({
  "title": "Harbour and soup",
  "pattern": "ABA",
  "separator": "\n\n",
  "topics": {"A": {"label": "Harbour", "colour": "#2ca02c"}, "B": {"label": "Soup", "colour": "#9467bd"}},
  "segments": [
    {"topic": "A", "text": "The harbour pilot boarded the freighter at dawn and took her through the narrows."},
    {"topic": "B", "text": "Simmer the lentils slowly with onion, cumin and a bay leaf."},
    {"topic": "A", "text": "By noon the pilot had left the ship at the outer buoy."}
  ],
  "question": "Through the narrows the freighter was guided by the"
})";
  return p;
}

using luka::test::count_colour;

#define REQUIRE_STUDIO()                                                                        \
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (scripts/setup.sh installs it)"; \
  if (!fs::exists(kModel)) GTEST_SKIP() << "no default model at " << kModel

TEST(StudioFiles, SavesALiveRunAndReplaysItWithItsOwnPromptAndControlsOff) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir(), config = d / "config", saved = d / "run.h5", shot = d / "replay.png";
  const fs::path prompt = write_prompt(d);
  // A corrupt recent-files list: the Studio starts with an empty list and replaces the file.
  fs::create_directories(config / "luka-studio");
  std::ofstream(config / "luka-studio" / "recent.json") << "{\"recent\": [oops";
  const RunResult r = studio(
      prompt, config,
      "load_model " + kModel.string() + "\nwait_idle 300\nframes 2\nexpect_locked off\n"
      "expect_prompt The harbour pilot boarded\n"
      "run 6\nwait_idle 300\nexpect_steps 5\n"
      "save_capture " + saved.string() + "\nframes 2\nexpect_recent 0 " + saved.string() + "\n"
      // The editor now holds another prompt: the replay must show the capture's, not this one.
      "free_text Completely different words\nframes 2\nexpect_prompt Completely different words\n"
      "open_capture " + saved.string() + "\nwait_idle 60\nframes 2\n"
      "expect_status replaying run.h5\nexpect_steps 5\nexpect_segments 3\n"
      "expect_prompt The harbour pilot boarded the freighter at dawn\nexpect_prompt Simmer the lentils slowly\n"
      "expect_prompt By noon the pilot had left the ship\nexpect_locked on\nexpect_recent 0 " + saved.string() + "\n"
      "frames 3\nscreenshot " + shot.string() + "\n"
      // Leaving the replay: the editor's prompt and the controls come back.
      "leave_replay\nwait_idle 60\nframes 2\nexpect_locked off\nexpect_prompt Completely different words\nquit\n",
      "1280x900");  // tall enough for the prompt panel to show the second segment unscrolled
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The saved file is an ordinary capture of the run: five steps, the prompt's three segments.
  const auto file = luka::capture::CaptureFile::open(saved);
  EXPECT_EQ(file->summary().complete_steps, 5);
  EXPECT_TRUE(file->summary().finished);
  ASSERT_EQ(file->segments().size(), 3u);
  EXPECT_EQ(file->segments()[1].label, "Soup");
  const RunResult inspect = luka::test::run_program(LUKA_CLI_PATH, {"inspect", saved.string()}, work_dir());
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("Harbour"), std::string::npos) << inspect.out;

  // The replay's prompt panel (left column, below the model panel, down to 58% of the window)
  // draws the capture's segments in their topic colours; the free-text editor it replaced draws none.
  const luka::viz::Image img = luka::viz::read_png(shot);
  ASSERT_EQ(img.height, 900);
  EXPECT_GT(count_colour(img, 0x2ca02c, 0, 150, 420, 522), 100u);  // Harbour
  EXPECT_GT(count_colour(img, 0x9467bd, 0, 150, 420, 522), 50u);   // Soup

  // The recent-files list was rewritten whole, with the saved capture first.
  const std::string recent = read_file(config / "luka-studio" / "recent.json");
  EXPECT_NE(recent.find("\"recent\""), std::string::npos) << recent;
  EXPECT_NE(recent.find(saved.string()), std::string::npos) << recent;
}

TEST(StudioFiles, ASaveWithoutARunOrToABadPathSaysWhy) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path d = work_dir();
  const RunResult nothing = studio(write_prompt(d), d / "config", "frames 2\nsave_capture " + (d / "x.h5").string() + "\n");
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_NE(nothing.err.find("nothing to save"), std::string::npos) << nothing.err;
  // A capture that cannot be read: the status says why, and it does not join the recent list.
  std::ofstream(d / "notes.h5") << "not a capture\n";
  const RunResult bad = studio(write_prompt(d), d / "config",
                               "open_capture " + (d / "notes.h5").string() + "\nwait_idle 60\nframes 3\nexpect_status notes.h5\nexpect_locked off\nquit\n");
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_FALSE(fs::exists(d / "config" / "luka-studio" / "recent.json"));
}

// A replayed prompt of long segments: each run shows at most two lines ending in an ellipsis, so
// the second segment is in view under the first at 1280x800; "full text" shows every line, and
// then the first segment alone fills the panel.
TEST(StudioFiles, AReplayedLongPromptShowsTwoLinesPerSegmentOrTheFullText) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir(), config = d / "config_long", capture = d / "long.h5";
  const fs::path prompt = d / "long.json";
  const std::string river =
      "The river rises in the hills above the town and runs north through a narrow valley of oak and ash. "
      "In spring the melt swells it until the fords close and the ferry at the mill carries carts across. "
      "By midsummer it falls again, and boys wade out to the gravel bars to fish for trout in the shallows. "
      "The old stone bridge at the market has five arches, and the middle one was rebuilt after a flood. "
      "Below the bridge the water slows, widens into reed beds, and herons stand there in the evening light.";
  std::ofstream(prompt) << R"({
  "title": "River, bread and trains",
  "pattern": "ABC",
  "separator": "\n\n",
  "topics": {"A": {"label": "River", "colour": "#2ca02c"}, "B": {"label": "Bread", "colour": "#9467bd"}, "C": {"label": "Trains", "colour": "#d62728"}},
  "segments": [
    {"topic": "A", "text": ")" + river + R"("},
    {"topic": "B", "text": "Knead the dough for ten minutes, then leave it to rise in a warm place until it has doubled."},
    {"topic": "C", "text": "The night train to the coast leaves at eleven and stops at every town along the valley."}
  ],
  "question": "The herons stand in the reed beds below the"
})";
  const RunResult c = luka::test::run_program(
      LUKA_CLI_PATH, {"capture", "--model", kModel.string(), "--prompt-file", prompt.string(), "--max-new-tokens", "2", "--quiet", "--out", capture.string()},
      work_dir());
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const fs::path compact = d / "long-compact.png", full = d / "long-full.png";
  const RunResult r = studio(write_prompt(d), config,
                             "open_capture " + capture.string() + "\nwait_idle 60\nframes 3\n"
                             "expect_prompt herons stand there in the evening light\n"  // the prompt whole
                             "expect_prompt_drawn \xE2\x80\xA6\nframes 2\nscreenshot " + compact.string() + "\n"
                             "replay_full_text on\nframes 2\nexpect_prompt_drawn herons stand there in the evening light\nframes 2\n"
                             "screenshot " + full.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The prompt panel (left column, between the model and layers panels): the first segment's
  // swatch in both, the second's only when the runs are two lines each.
  const luka::viz::Image a = luka::viz::read_png(compact), b = luka::viz::read_png(full);
  EXPECT_GT(count_colour(a, 0x2ca02c, 0, 150, 420, 470), 50u);  // River
  EXPECT_GT(count_colour(a, 0x9467bd, 0, 150, 420, 470), 50u);  // Bread, under it
  EXPECT_GT(count_colour(b, 0x2ca02c, 0, 150, 420, 470), 50u);
  EXPECT_EQ(count_colour(b, 0x9467bd, 0, 150, 420, 470), 0u);  // pushed below the panel by River's lines
}

}  // namespace

// The prompt builder's Open, clicked as a user clicks it (through ImGui's mouse input): the
// builder shows the file's segments and says it opened it. Its button shares the panel with the
// capture row's Open; with one ID the capture row's took every click and this one never fired.
TEST(StudioFiles, ThePromptBuildersOpenButtonLoadsThePromptFile) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path d = work_dir(), orchard = d / "orchard.json", shot = d / "prompt-opened.png";
  std::ofstream(orchard) << R"({
  "pattern": "AB",
  "topics": {"A": {"label": "Orchard", "colour": "#17becf"}, "B": {"label": "Ferry", "colour": "#bcbd22"}},
  "segments": [
    {"topic": "A", "text": "The pear trees in the orchard were grafted onto quince roots."},
    {"topic": "B", "text": "The ferry crossed the sound four times a day in summer."}
  ],
  "question": "The pears were grafted onto"
})";
  const RunResult r = studio(write_prompt(d), d / "config_prompt_open",
                             "frames 2\nexpect_prompt The harbour pilot boarded\n"
                             "prompt_file " + orchard.string() + "\nclick prompt_file_open\n"
                             "expect_prompt The pear trees in the orchard were grafted\nexpect_prompt The ferry crossed the sound\n"
                             "expect_prompt_notice opened " + orchard.string() + "\nframes 2\nscreenshot " + shot.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The builder's segments in the file's topic colours (the prompt panel, left column).
  const luka::viz::Image img = luka::viz::read_png(shot);
  EXPECT_GT(count_colour(img, 0x17becf, 0, 150, 420, 800), 50u);  // Orchard
  EXPECT_GT(count_colour(img, 0xbcbd22, 0, 150, 420, 800), 50u);  // Ferry
}

// A live run saved from the Studio carries the manifest `luka capture` writes for the same run:
// creation time, seed, device, sampling settings, and its live mode switch as the --schedule
// entry the CLI run was given. `luka inspect --json` prints JSON that Python's json module reads,
// for every kind of capture: the CLI's, the Studio's live run saved, a replay saved again, and
// captures whose manifest JSON is empty (older files) or unreadable.
TEST(StudioFiles, ASavedLiveRunCarriesTheCliManifestAndInspectJsonIsValidForEveryCapture) {
  REQUIRE_STUDIO();
  const fs::path d = work_dir() / "manifest";
  fs::remove_all(d);
  fs::create_directories(d);
  const fs::path prompt = write_prompt(d), cli = d / "cli.h5", live = d / "live.h5", again = d / "again.h5";
  const std::string schedule = "step=2:layers=5:mode=lined";
  const RunResult c = luka::test::run_program(
      LUKA_CLI_PATH, {"capture", "--model", kModel.string(), "--prompt-file", prompt.string(), "--max-new-tokens", "6", "--ignore-eos",
                      "--temperature", "0.8", "--top-k", "20", "--top-p", "0.9", "--seed", "1234", "--schedule", schedule, "--quiet", "--out", cli.string()},
      d);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // The same run in the Studio: paused after its first step, layer 5 switched to lined, resumed.
  const RunResult r = studio(prompt, d / "config",
                             "load_model " + kModel.string() + "\nwait_idle 300\nsampling 0.8 20 0.9 1234\n"
                             "run 6 paused ignore_eos\nwait_paused 300\nstep\nwait_steps 1 300\nwait_paused 300\n"
                             "set_mode 5 lined\nresume\nwait_idle 300\nexpect_steps 5\nexpect_mode 1 5 dense\nexpect_mode 2 5 lined\n"
                             "save_capture " + live.string() + "\nopen_capture " + live.string() + "\nwait_idle 60\nframes 2\n"
                             "save_capture " + again.string() + "\nquit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const luka::capture::Manifest a = luka::capture::CaptureFile::open(cli)->summary().manifest;
  const luka::capture::Manifest b = luka::capture::CaptureFile::open(live)->summary().manifest;
  for (const auto* m : {&a, &b}) {
    EXPECT_EQ(m->created.size(), 20u) << m->created;  // 2026-11-29T04:05:06Z
    EXPECT_EQ(m->created.back(), 'Z') << m->created;
    EXPECT_EQ(m->seed, 1234);
  }
  EXPECT_EQ(b.model_path, a.model_path);
  EXPECT_EQ(b.device, a.device);
  EXPECT_EQ(b.dtype, a.dtype);
  EXPECT_EQ(b.weights_hash, a.weights_hash);
  // The live capture records maps up to 4096 rows (run_controller.cpp), the CLI's default is 2048:
  // the rest of the record spec is the same.
  const auto without_map_cap = [](std::string spec) { return std::regex_replace(spec, std::regex("map_cap=[0-9]+;?"), ""); };
  EXPECT_EQ(without_map_cap(b.record), without_map_cap(a.record));
  const auto ga = nlohmann::json::parse(a.generation), gb = nlohmann::json::parse(b.generation);
  for (const auto& [key, value] : ga.items()) {
    ASSERT_TRUE(gb.contains(key)) << "the Studio's generation lacks " << key << ": " << b.generation;
    if (key != "prompt") EXPECT_EQ(gb[key], value) << key;  // the CLI names the prompt file, the Studio its own prompt
  }
  EXPECT_EQ(gb["schedule"], schedule);
  ASSERT_EQ(gb["live_changes"].size(), 1u) << b.generation;
  EXPECT_EQ(gb["live_changes"][0]["step"], 2);
  // Saved again from the replay: the same manifest.
  const luka::capture::Manifest b2 = luka::capture::CaptureFile::open(again)->summary().manifest;
  EXPECT_EQ(b2.generation, b.generation);
  EXPECT_EQ(b2.created, b.created);

  // Older and damaged manifests: generation empty, generation and config not JSON.
  const fs::path empty = d / "empty.h5", broken = d / "broken.h5";
  fs::copy_file(cli, empty);
  fs::copy_file(cli, broken);
  const std::string python = fs::exists(LUKA_PYTHON) ? quote(LUKA_PYTHON) : "python3";
  const RunResult edit = luka::test::run_shell(
      python + " -c \"import h5py, sys\nfor path, text in [(sys.argv[1], ''), (sys.argv[2], '{not json')]:\n"
      "  with h5py.File(path, 'r+') as f:\n    m = f['manifest']\n    m.attrs['generation'] = text\n"
      "    if text: m.attrs['luka_config'] = text\n\" " + quote(empty.string()) + " " + quote(broken.string()),
      d);
  if (edit.exit_code != 0) std::printf("h5py cannot edit captures here (%s): the damaged manifests are not checked\n", edit.err.c_str());
  for (const fs::path& f : {cli, live, again, empty, broken}) {
    if (edit.exit_code != 0 && (f == empty || f == broken)) continue;
    const RunResult j = luka::test::run_shell("env -u LUKA_MODEL " + quote(LUKA_CLI_PATH) + " inspect " + quote(f.string()) +
                                                  " --json | " + python + " -c 'import json, sys; json.load(sys.stdin); print(\"valid\")'",
                                              d);
    EXPECT_EQ(j.exit_code, 0) << f << ": " << j.err;
    EXPECT_EQ(j.out, "valid\n") << f;
  }
  // The text report names the live switch.
  const RunResult text = luka::test::run_program(LUKA_CLI_PATH, {"inspect", live.string()}, d);
  EXPECT_NE(text.out.find("switches   " + schedule), std::string::npos) << text.out;
}

// `luka studio ARGS --script` with the session and recent files under `config`.
RunResult studio_args(const fs::path& dir, const fs::path& config, const std::string& args, const std::string& script) {
  const fs::path s = dir / "args.script";
  std::ofstream(s) << script;
  return luka::test::run_shell("env -u LUKA_MODEL XDG_CONFIG_HOME=" + quote(config.string()) + " " + kStudioEnv +
                                   "xvfb-run -a -s '-screen 0 1280x800x24' " + quote(LUKA_CLI_PATH) + " studio --size 1280x800 " + args +
                                   " --script " + quote(s.string()),
                               dir);
}

// --fresh starts from the defaults and still saves the session at exit; --no-save keeps the
// session file as it was; --help says so.
TEST(StudioFiles, FreshStillSavesTheSessionAndNoSaveDoesNot) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path d = work_dir() / "fresh";
  fs::remove_all(d);
  fs::create_directories(d);
  const fs::path config = d / "config", session = config / "luka-studio" / "session.json";
  const RunResult fresh = studio_args(d, config, "--fresh", "free_text Remember these words\nframes 2\nquit\n");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  ASSERT_TRUE(fs::exists(session)) << "--fresh saved no session";
  EXPECT_NE(read_file(session).find("Remember these words"), std::string::npos) << read_file(session);
  // The next --fresh start shows the defaults, not the session it saved.
  const RunResult again = studio_args(d, config, "--fresh --no-save",
                                      "free_text Other words\nframes 2\nquit\n");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(read_file(session).find("Remember these words"), std::string::npos) << "--no-save wrote the session: " << read_file(session);
  EXPECT_EQ(read_file(session).find("Other words"), std::string::npos) << read_file(session);
  const RunResult help = luka::test::run_program(LUKA_CLI_PATH, {"studio", "--help"}, d);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--no-save"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("the session is still saved at exit"), std::string::npos) << help.out;
}

// Scripts: wait_idle waits for the model that --model loads at start-up; an error names the
// script's file and line, whatever failed; a screenshot shows the tab selected just before it.
TEST(StudioFiles, ScriptsWaitForTheStartUpLoadNameTheLineOfAnErrorAndShootTheFinishedFrame) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const fs::path d = work_dir() / "scripts";
  fs::create_directories(d);
  if (fs::exists(kModel)) {
    const RunResult load = studio_args(d, d / "config", "--model " + quote(kModel.string()), "wait_idle 300\nexpect_ui state ready\nquit\n");
    EXPECT_EQ(load.exit_code, 0) << load.err;
  }
  const RunResult bad = studio_args(d, d / "config", "", "frames 1\n\nzoom lots\nquit\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("args.script:3: zoom"), std::string::npos) << bad.err;

  // The Topics tab asked for in the line before the screenshot: ImGui selects a tab in the frame
  // after it is asked for, so a screenshot of the same frame would still show the Output tab.
  const fs::path output_tab = d / "output-tab.png", topics_tab = d / "topics-tab.png";
  const RunResult shots = studio_args(d, d / "config", "", "frames 3\nscreenshot " + output_tab.string() + "\nshow_topics\nscreenshot " +
                                                               topics_tab.string() + "\nquit\n");
  ASSERT_EQ(shots.exit_code, 0) << shots.err;
  // The bottom panel (right of the left column, below the map at 74% of the window) changed.
  const luka::viz::Image a = luka::viz::read_png(output_tab), b = luka::viz::read_png(topics_tab);
  ASSERT_EQ(a.rgba.size(), b.rgba.size());
  std::size_t changed = 0;
  for (int y = 592; y < a.height; ++y)
    for (int x = 420; x < a.width; ++x) {
      const std::size_t at = (static_cast<std::size_t>(y) * static_cast<std::size_t>(a.width) + static_cast<std::size_t>(x)) * 4;
      changed += std::memcmp(&a.rgba[at], &b.rgba[at], 3) != 0;
    }
  EXPECT_GT(changed, 200u) << "the screenshot after show_topics still shows the Output tab";
}

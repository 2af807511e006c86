// Scripted UI actions (`luka studio --script FILE`), for tests and demos: one command per line,
// run between frames, in order. `#` starts a comment.
//
//   device auto|cpu|cuda|cuda:N | weights dequantized|quantized | load_model PATH | open_capture PATH | free_text TEXT... | run [N] [paused] [ignore_eos] | step | resume | stop
//   set_mode LAYER dense|lined|clustered|kascade|press|quest | preset NAME | select LAYER HEAD | scale log|linear
//   view effective|dense|difference | grid heads|layers|off | pattern ABAB | wikisalad FILE N |
//   save_prompt PATH | expect_pattern P | expect_glyph HEX | set OVERRIDE | sampling T K P SEED |
//   expect_refined STEP LAYER HEAD N | expect_kept STEP LAYER HEAD KEPT DROPPED (the cover's attended and left-out tokens) |
//   zoom FACTOR | fit | layout auto|full|rows | print_geometry (the map's screen position and transform) | compare PATH|off | compare_run PRESET|layers panel (B: A's tokens run again under it) | wait_compare [SECONDS] | compare_difference on|off | timeline_difference on|off (the cover timeline's A ≠ B) | mouse X Y (move the cursor) | search TEXT | expect_found TOKEN | track A-B|text:STRING | expect_track FIRST LAST | save_session PATH | load_session PATH | show_topics | show_head_scores | expect_head_scores ROWS | calibration FILE (attach to the runs started next) | head_scores_source prefill|decode|calibration | expect_calibration ROWS [CANDIDATES] | show_timeline | show_fidelity | shadow on|off | export PATH.{png,svg,pdf} | frames N | wait_idle [SECONDS] | wait_paused [SECONDS] | wait_steps N [SECONDS]
//   measure FRAMES (prints frame times) | print_first_map |
//   expect_segments N | expect_mode STEP LAYER MODE | expect_fidelity STEP LAYER | expect_steps N | expect_status TEXT | screenshot PATH | quit
//   save_capture PATH (waits until written) | leave_replay | expect_prompt TEXT... | expect_locked on|off |
//   expect_recent INDEX PATH
//   key NAME (a key press for the shortcuts: space, f1, escape, up, down, left, right, or a character) |
//   expect_ui layer|head|scale|view|layout|grid|dtype|prompt|help|hover|state|weights|calibration|compare VALUE | mixed A B (the layers panel's mixed(a,b) button)
//   hover output TOKEN | hover step STEP | hover timeline_diff STEP TOKEN (the mouse over a generated token, a decode step's row, or a cell of the timeline's A ≠ B) |
//   expect_tooltip TEXT... (the map's tooltip) | expect_timeline_tooltip TEXT... (the cover timeline's) | expect_prompt_drawn TEXT... (the prompt panel's read-only text as drawn) |
//   replay_full_text on|off (a replayed prompt's runs in full, or at most two lines each) |
//   hold_prefill FRACTION | release_prefill | wait_prefill_held [SECONDS] | expect_overlay TEXT... (over a map still computing) |
//   print_status (state, prefill fraction, message); print_geometry also prints what the last frame drew (rect NAME x0 y0 x1 y1 [text TEXT], the text of a cell that shows a value)
//   hold_tasks on|off (the task pool starts nothing while on) | expect_task TEXT... (the background work list as drawn)
//   click NAME (a left click on a thing the last frame drew: prompt_file_open, prompt_file_save, capture_open, ...) |
//   prompt_file PATH (the prompt builder's file field) | expect_prompt_notice TEXT... (the builder's last message) |
//   hold_load | release_load (the next model load waits where it reads its files, deaf to quit and cancel) |
//   chat on|off | query_agnostic on|off (the builder's segments prefilled before its question) | select_step N (the decode step the panels show, 0: the latest) |
//   expect_drawn NAME TEXT... (the last frame drew NAME, with a text containing TEXT: layer_params_heading,
//   layer_paged, layer_ms/L, ...)
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/studio/views/ui_state.h"

namespace luka::studio {

class Script {
 public:
  // Throws luka::Error naming the file for an unreadable file or an unknown command.
  static Script load(const std::filesystem::path& path);

  // Runs commands until one has to wait for later frames. Returns false when the script asked to
  // quit or ended. `screenshot` is the path to capture after this frame is drawn (empty: none).
  // Throws luka::Error("<file>:<line>: ...") when a command fails or a wait times out.
  bool advance(UiState& ui, std::string& screenshot);
  bool failed() const { return failed_; }
  bool waiting() const { return waiting_; }  // in wait_idle, wait_paused or wait_steps

 private:
  struct Line {
    int number;
    std::vector<std::string> words;
  };
  std::string where(const Line& l) const;
  bool run_lines(UiState& ui, std::string& screenshot);
  std::string file_;
  std::vector<Line> lines_;
  std::size_t next_ = 0;
  int frames_left_ = 0;
  std::size_t current_ = 0;  // the line being run (errors name it)
  int shot_frames_ = -1;     // screenshot: frames still to draw before it is taken (-1: none asked)
  bool waiting_ = false;
  std::chrono::steady_clock::time_point wait_start_;
  std::optional<std::chrono::steady_clock::time_point> click_wait_;  // click: waiting for its target to be drawn
  bool failed_ = false;
};

}  // namespace luka::studio

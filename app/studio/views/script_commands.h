// The Studio's script commands (script.h) as its two files share them: what a command sees
// (Context), what its line does next (Flow), and every command's handler, defined in script.cpp by
// what they touch; script_table.cpp names each command once and runs the lines. Internal to the
// script: nothing else includes it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/studio/views/ui_state.h"
#include "core/util/error.h"

namespace luka::studio::script_detail {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t);

AttentionMode parse_mode(const std::string& s, const std::string& where);

// What a command's line does to the script: done (the next line runs in this frame), hold (this
// line runs again after the next frame), yield (done; the next line runs after the next frame),
// or quit.
enum class Flow { kNext, kHold, kYield, kQuit };

// What a command sees: the UI, its line's words, where the line is (errors name it), and the
// script's state between frames.
struct Context {
  UiState& ui;
  const std::vector<std::string>& w;
  const std::string where;
  std::string& screenshot;
  bool& waiting;                              // the line holds, waiting for something
  Clock::time_point& wait_start;
  int& frames_left;                           // frames to draw before the next line
  int& shot_frames;                           // screenshot: frames still to draw (-1: none asked)
  std::optional<Clock::time_point>& click_wait;  // click: waiting for its target to be drawn

  const std::string& cmd() const { return w[0]; }
  const std::string& arg(std::size_t i) const {
    if (i >= w.size()) fail(where, cmd() + ": missing argument " + std::to_string(i));
    return w[i];
  }
  double number(std::size_t i) const { return std::stod(arg(i)); }
  // The words from `first` on, joined by spaces (a text argument).
  std::string rest(std::size_t first) const {
    std::string out;
    for (std::size_t i = first; i < w.size(); ++i) out += (i > first ? " " : "") + w[i];
    return out;
  }
  // The line's wait, started the first time it is asked: true once `seconds` have passed since.
  bool past(double seconds) {
    if (!waiting) {
      waiting = true;
      wait_start = Clock::now();
    }
    return seconds_since(wait_start) > seconds;
  }
  Flow done() {
    waiting = false;
    return Flow::kNext;
  }
  std::shared_ptr<const capture::CaptureView> view(const char* what = "no capture to check") const {
    auto v = ui.controller.view();
    if (!v) fail(where, what);
    return v;
  }
};

// wait_until's conditions: the controller idle, paused (or idle), holding its prefill, or N steps made.
enum class Until { kIdle, kPaused, kPrefillHeld, kSteps };

// The handlers (script.cpp), grouped there by what they touch.
Flow save_capture(Context& c);
Flow expect_text(Context& c, const std::string& got, const char* what);
Flow hover(Context& c);
Flow expect_drawn(Context& c);
Flow click(Context& c);
Flow wait_compare(Context& c);
Flow wait_until(Context& c, Until until);
Flow expect_head_scores(Context& c);
Flow compare(Context& c);
Flow screenshot(Context& c);
Flow key(Context& c);
Flow load_model(Context& c);
Flow weights(Context& c);
Flow device(Context& c);
Flow run(Context& c);
Flow set_mode(Context& c);
Flow preset(Context& c);
Flow set(Context& c);
Flow shadow(Context& c);
Flow sampling(Context& c);
Flow mixed(Context& c);
bool on_off(Context& c);
Flow expect_locked(Context& c);
Flow expect_recent(Context& c);
Flow expect_pattern(Context& c);
Flow expect_prompt_notice(Context& c);
Flow free_text(Context& c);
Flow expect_glyph(Context& c);
Flow search(Context& c);
Flow track(Context& c);
Flow expect_track(Context& c);
Flow expect_found(Context& c);
Flow layout(Context& c);
Flow print_geometry(Context& c);
Flow print_status(Context& c);
Flow compare_run(Context& c);
Flow expect_refined(Context& c);
Flow expect_kept(Context& c);
Flow expect_segments(Context& c);
Flow expect_steps(Context& c);
Flow expect_mode(Context& c);
Flow expect_fidelity(Context& c);
Flow expect_status(Context& c);
Flow calibration(Context& c);
Flow head_scores_source(Context& c);
Flow expect_calibration(Context& c);
Flow load_session_command(Context& c);
Flow expect_ui(Context& c);

}  // namespace luka::studio::script_detail

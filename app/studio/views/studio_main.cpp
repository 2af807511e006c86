// luka studio: the desktop explorer (docs/design.md §7). GLFW window, OpenGL 3.3 core, Dear ImGui;
// a fixed layout of panels over the RunController data model.
#include <GLFW/glfw3.h>
#include <GL/gl.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "app/studio/views/studio.h"
#include "app/studio/views/emoji_glyphs.h"
#include "app/studio/views/script.h"
#include "app/studio/views/session_state.h"
#include "app/studio/views/shortcuts.h"
#include "app/studio/views/style.h"
#include "app/studio/views/ui_state.h"
#include "core/device/device.h"
#include "captures/reader.h"
#include "core/prompt/prompt_file.h"
#include "core/util/error.h"
#include "viz/png.h"

namespace luka::studio {

namespace {

std::string glfw_error;

void on_glfw_error(int code, const char* description) {
  glfw_error = std::string(description ? description : "unknown error") + " (GLFW error " + std::to_string(code) + ")";
}

void save_screenshot(GLFWwindow* window, const std::string& path) {
  int w = 0, h = 0;
  glfwGetFramebufferSize(window, &w, &h);
  viz::Image img;
  img.width = w;
  img.height = h;
  img.rgba.resize(static_cast<std::size_t>(w) * h * 4);
  std::vector<std::uint8_t> flipped(img.rgba.size());
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, flipped.data());
  for (int y = 0; y < h; ++y)
    std::copy_n(flipped.data() + static_cast<std::size_t>(h - 1 - y) * w * 4, static_cast<std::size_t>(w) * 4,
                img.rgba.data() + static_cast<std::size_t>(y) * w * 4);
  viz::write_png(img, path);
}

// Fonts from Debian packages, merged into one atlas. A later font only adds the glyphs the earlier
// ones lack (ImGui keeps the first glyph merged for a code point), so DejaVu's style wins where it
// has a glyph. Ranges are limited to the scripts token pieces need: every glyph costs atlas space.
// Dear ImGui from Debian is built with 16-bit ImWchar, so nothing beyond U+FFFF can be drawn
// (most emoji): panels show those as <U+XXXXX> (viz::token_text with max_code_point).
void load_fonts() {
  ImGuiIO& io = ImGui::GetIO();
  // ImGui scales a font to fit its ascent-to-descent height in the given size; the sizes below
  // give each merged font DejaVu's em (12.9 px at 15 px), whatever its line height.
  const auto merge_font = [&](const char* path, float size, const ImWchar* ranges, int oversample) {
    if (!std::filesystem::exists(path)) return;
    ImFontConfig merge;
    merge.MergeMode = true;
    merge.OversampleH = oversample;
    io.Fonts->AddFontFromFileTTF(path, size, &merge, ranges);
  };
  // DejaVu (fonts-dejavu-core): Latin, Greek, Cyrillic, punctuation, arrows, maths, box drawing,
  // and the BMP's symbols and dingbats (☀ ♥ ✔ ❤ ...) that emoji pieces often are.
  static const ImWchar ranges[] = {0x0020, 0x024F, 0x0370, 0x03FF, 0x0400, 0x04FF, 0x2000, 0x22FF, 0x2300, 0x23FF, 0x2460, 0x24FF,
                                   0x2500, 0x27BF, 0x2900, 0x2BFF, 0xFE00, 0xFE0F, 0};
  const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  if (!std::filesystem::exists(font)) {
    io.Fonts->AddFontDefault();
    return;
  }
  io.Fonts->AddFontFromFileTTF(font, 15.f, nullptr, ranges);
  // WenQuanYi Micro Hei (fonts-wqy-microhei) for CJK, so Qwen's Chinese and Japanese token pieces
  // render (common simplified Chinese, kana and common kanji, Hangul syllables).
  static ImVector<ImWchar> cjk_ranges;
  if (cjk_ranges.empty()) {
    ImFontGlyphRangesBuilder b;
    b.AddRanges(io.Fonts->GetGlyphRangesChineseSimplifiedCommon());
    b.AddRanges(io.Fonts->GetGlyphRangesJapanese());
    static const ImWchar hangul[] = {0x3131, 0x3163, 0xAC00, 0xD7A3, 0};
    b.AddRanges(hangul);
    b.BuildRanges(&cjk_ranges);
  }
  merge_font("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 15.f, cjk_ranges.Data, 1);  // a large atlas: keep it small
  // Noto Sans Arabic and Hebrew (fonts-noto-core). Arabic includes its presentation forms
  // (U+FB50..U+FDFF, U+FE70..U+FEFF): the joined letter shapes, since ImGui does no shaping.
  static const ImWchar arabic[] = {0x0600, 0x06FF, 0x0750, 0x077F, 0xFB50, 0xFDFF, 0xFE70, 0xFEFF, 0};
  merge_font("/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf", 27.2f, arabic, 2);  // tall: room for stacked marks
  static const ImWchar hebrew[] = {0x0590, 0x05FF, 0xFB1D, 0xFB4F, 0};
  merge_font("/usr/share/fonts/truetype/noto/NotoSansHebrew-Regular.ttf", 17.5f, hebrew, 2);
  // Symbola (fonts-symbola), a monochrome outline font (colour emoji fonts are bitmaps that
  // stb_truetype cannot draw), for the BMP symbols DejaVu lacks (✅ ❌ ❓ ✨ ⭐ ⌛ ...).
  static const ImWchar symbols[] = {0x2300, 0x23FF, 0x2460, 0x24FF, 0x2600, 0x27BF, 0x2900, 0x2BFF, 0x3030, 0x3030, 0x303D, 0x303D,
                                    0x3297, 0x3297, 0x3299, 0x3299, 0};
  const char* symbola = "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf";
  merge_font(symbola, 16.3f, symbols, 1);
  // Emoji beyond U+FFFF, which 16-bit characters cannot name: Symbola's, drawn into the atlas at
  // private-use code points on DejaVu's baseline (emoji_glyphs.h; token_label writes them there).
  if (std::filesystem::exists(symbola) && add_emoji_glyphs(io.Fonts, io.Fonts->Fonts[0], symbola, 16.3f, font_ascent(font, 15.f)) > 0) {
    io.Fonts->Build();
    draw_emoji_glyphs(io.Fonts);
  }
}

// Nothing that changes the picture is under way: no load, run or save, no background read, no
// map window being fetched.
bool studio_idle(const UiState& ui) {
  return !ui.controller.busy() && ui.tasks.unfinished() == 0 && ui.heatmap.fetcher.idle() &&
         (!ui.compare.view || ui.compare.map.fetcher.idle());
}

// The fixed layout: model, prompt and layers panels on the left, the map and the bottom tabs on the
// right, in a W x H framebuffer; dragging the map panel's left or bottom edge, or the prompt
// panel's bottom edge, moves the split.
void draw_panels(studio::UiState& ui, float W, float H) {
  // The split follows ui.window.split; dragging the map panel's left or bottom edge, or the prompt
  // panel's bottom edge, moves it.
  auto& split = ui.window.split;
  // The model panel is as tall as its content was last frame (a wrapped error takes more), up
  // to a third of the window; the prompt panel starts below it.
  const float model_h = std::round(std::clamp(ui.window.model_height > 0 ? ui.window.model_height : 180.f, 120.f, std::max(120.f, H / 3)));
  const float left = split.left > 0 ? std::round(W * split.left) : std::min(420.f, std::round(W * 0.34f)),
              prompt_bottom = std::max({220.f, std::round(H * split.prompt), model_h + 100}), map_bottom = std::round(H * split.map);
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse;
  const ImGuiWindowFlags sizable = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse;
  const auto panel = [&](const char* title, ImVec2 pos, ImVec2 size, void (*draw)(studio::UiState&), bool resizable = false) {
    ImGui::SetNextWindowPos(pos, ImGuiCond_Always);
    ImGui::SetNextWindowSize(size, ImGuiCond_Always);
    ImVec2 got_pos = pos, got_size = size;
    if (ImGui::Begin(title, nullptr, resizable ? sizable : fixed)) {
      got_pos = ImGui::GetWindowPos();
      got_size = ImGui::GetWindowSize();
      draw(ui);
    }
    ImGui::End();
    return std::make_pair(got_pos, got_size);
  };
  const auto fraction = [](float v) { return std::clamp(v, 0.15f, 0.85f); };
  panel("Model", ImVec2(0, 0), ImVec2(left, model_h), studio::draw_model_panel);
  const auto [prompt_pos, prompt_size] = panel("Prompt", ImVec2(0, model_h), ImVec2(left, prompt_bottom - model_h), studio::draw_prompt_panel, true);
  if (std::abs(prompt_pos.y + prompt_size.y - prompt_bottom) > 0.5f) split.prompt = fraction((prompt_pos.y + prompt_size.y) / H);
  panel("Layers", ImVec2(0, prompt_bottom), ImVec2(left, H - prompt_bottom), studio::draw_layers_panel);
  const auto [map_pos, map_size] = panel("Attention map", ImVec2(left, 0), ImVec2(W - left, map_bottom), studio::draw_heatmap_panel, true);
  if (std::abs(map_pos.x - left) > 0.5f) split.left = fraction(map_pos.x / W);
  if (std::abs(map_pos.y + map_size.y - map_bottom) > 0.5f) split.map = fraction((map_pos.y + map_size.y) / H);
  panel("Output", ImVec2(left, map_bottom), ImVec2(W - left, H - map_bottom), [](studio::UiState& u) {
    if (!ImGui::BeginTabBar("bottom")) return;
    struct Tab {
      const char* name;
      BottomTab tab;
      void (*draw)(studio::UiState&);
    };
    static const Tab kTabs[] = {{"Output", BottomTab::kOutput, studio::draw_output_panel},
                                {"Cover timeline", BottomTab::kTimeline, studio::draw_timeline_panel},
                                {"Fidelity & cost", BottomTab::kFidelity, studio::draw_fidelity_panel},
                                {"Topics", BottomTab::kTopics, studio::draw_topics_panel},
                                {"Head scores", BottomTab::kHeadScores, studio::draw_head_scores_panel}};
    for (const Tab& t : kTabs)
      if (ImGui::BeginTabItem(t.name, nullptr, u.window.select_tab == t.tab ? ImGuiTabItemFlags_SetSelected : 0)) {
        t.draw(u);
        ImGui::EndTabItem();
      }
    u.window.select_tab.reset();
    ImGui::EndTabBar();
  });
}

// `measure FRAMES` (scripts): collects the frame times, and prints their statistics once enough came.
void record_frame_time(studio::UiState& ui, std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point last_frame) {
  if (ui.timing.measure_frames > 0) {
    ui.timing.frame_ms.push_back(std::chrono::duration<double, std::milli>(now - last_frame).count());
    if (static_cast<int>(ui.timing.frame_ms.size()) == ui.timing.measure_frames) {
      std::vector<double> t = ui.timing.frame_ms;
      std::sort(t.begin(), t.end());
      double mean = 0;
      for (const double x : t) mean += x;
      mean /= static_cast<double>(t.size());
      std::printf("frames %zu mean %.2f ms (%.1f fps) median %.2f ms p95 %.2f ms\n", t.size(), mean, 1000.0 / mean, t[t.size() / 2],
                  t[t.size() * 95 / 100]);
      std::fflush(stdout);
      ui.timing.measure_frames = 0;
    }
  }
}

// The window's first state: the last session (unless --fresh), a calibration, and the capture to
// replay or the model to load (a script loads its own unless --model names one).
std::filesystem::path start_session(studio::UiState& ui, const WindowOptions& options, bool scripted) {
  const auto launched = options.launched;
  const InterwovenPrompt& prompt = options.prompt;
  ui.timing.started = launched;
  ui.prompt.interwoven = prompt;
  const auto salad = std::filesystem::path(LUKA_SOURCE_DIR).parent_path() / "shared" / "data" / "wikisalad" / "easy_2topic_short.json";
  ui.prompt.wikisalad_path = std::filesystem::exists(salad) ? salad.lexically_normal().string() : "";
  const std::filesystem::path session_file = default_session_file();
  if (options.restore) {
    ui.notice = load_session(ui, session_file);
    if (options.prompt_given) ui.prompt.interwoven = prompt;
  }
  if (!options.calibration.empty()) attach_calibration(ui, options.calibration);
  ui.controller.set_step_engine(options.step_engine);
  if (!options.capture.empty()) {
    ui.controller.open_capture(options.capture);
  } else {
    std::error_code ec;
    if (!options.restore || options.model_given || ui.model.path.empty() || !std::filesystem::exists(ui.model.path, ec))
      ui.model.path = options.model.string();
    if (!options.restore || options.device_given) ui.model.device = options.device;
    if (!options.restore || options.weights_given) ui.model.weights = options.weights;
    try {
      // A script loads what it needs itself, unless --model names one: then it is loaded at
      // start-up as without a script, and the script's wait_idle waits for it.
      if (!scripted || options.model_given)
        ui.controller.load_model(ui.model.path, load_options(ui), parse_device(ui.model.device));
    } catch (const std::exception& e) {  // a remembered device that is gone: the panel says so
      ui.notice = e.what();
    }
  }
  return session_file;
}

}  // namespace

int run_window(const WindowOptions& options) {
  std::optional<Script> script;
  if (!options.script.empty()) script = Script::load(options.script);
  int width = options.width, height = options.height;

  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit())
    throw Error("cannot open a window: " + glfw_error + " (no display? set DISPLAY, or run under xvfb-run -a)");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  GLFWwindow* window = glfwCreateWindow(width, height, "LuKA Studio", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    throw Error("cannot create an OpenGL 3.3 window: " + glfw_error);
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(script ? 0 : 1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is the session's (session_state.h), not an ini file's
  apply_style();
  load_fonts();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  int exit_code = 0;
  {
    auto ui = std::make_unique<studio::UiState>();
    const std::filesystem::path session_file = start_session(*ui, options, script.has_value());
    bool running = true;
    auto last_frame = std::chrono::steady_clock::now();
    // Frames are drawn as fast as the display takes them while something runs, loads or reads,
    // and for a moment after (results arrive, hovers settle); otherwise the loop sleeps until an
    // event comes, or half a second passes (for what changes without one), so that an idle
    // window takes almost no CPU. Scripts always draw: their frames are their clock.
    using Clock = std::chrono::steady_clock;
    constexpr auto kLinger = std::chrono::milliseconds(500);
    auto active_until = Clock::now() + kLinger;
    while (running && !glfwWindowShouldClose(window)) {
      if (script || Clock::now() < active_until) {
        glfwPollEvents();
      } else {
        const auto asleep = Clock::now();
        glfwWaitEventsTimeout(0.5);
        if (Clock::now() - asleep < std::chrono::milliseconds(450)) active_until = Clock::now() + kLinger;  // an event woke it
      }
      ui->tasks.poll();  // background work's outcomes, handed back here on the UI thread
      const auto now = std::chrono::steady_clock::now();
      record_frame_time(*ui, now, last_frame);
      last_frame = now;
      std::string screenshot;
      if (script) {
        try {
          running = script->advance(*ui, screenshot);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "luka studio: error: %s\n", e.what());
          exit_code = 1;
          break;
        }
        // While the script waits for the model, frames need not come as fast as they can: they
        // would take a core from the run being waited for.
        if (script->waiting()) std::this_thread::sleep_for(std::chrono::milliseconds(15));
        if (ui->move_mouse) {
          glfwSetCursorPos(window, ui->move_mouse->first, ui->move_mouse->second);
          ui->move_mouse.reset();
        }
      }
      apply_pending_config(*ui);
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      if (ui->click) {  // after the backend has read the real mouse, so the script's wins
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2(static_cast<float>(ui->click->x), static_cast<float>(ui->click->y));
        io.MouseDown[0] = ui->click->frame == 1;
        if (++ui->click->frame > 2) ui->click.reset();
      }
      ImGui::NewFrame();
      int fw = 0, fh = 0;
      glfwGetFramebufferSize(window, &fw, &fh);
      draw_panels(*ui, static_cast<float>(fw), static_cast<float>(fh));
      studio::draw_task_list(*ui);
      studio::update_shortcuts(*ui);  // after the panels: its help overlay goes on top
      ImGui::Render();
      glViewport(0, 0, fw, fh);
      glClearColor(0.08f, 0.08f, 0.09f, 1.f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (!screenshot.empty()) {
        try {
          save_screenshot(window, screenshot);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "luka studio: error: %s\n", e.what());
          exit_code = 1;
          break;
        }
      }
      glfwSwapBuffers(window);
      if (!studio_idle(*ui)) active_until = Clock::now() + kLinger;
    }
    if (script) ui->controller.stop();
    if (options.save && !session_file.empty()) {
      try {
        save_session(*ui, session_file);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "luka studio: warning: the session was not saved: %s\n", e.what());
      }
    }
    // A load that has not returned may be blocked in the kernel (a FIFO in the model's place, a
    // hung network mount), where nothing interrupts it, and the controller's destructor would wait
    // for it. So the process ends here without it, once a save in progress is cancelled and has
    // cleaned up (a save only writes its own .partial file, and checks for cancel often).
    if (ui->controller.load_pending()) {
      ui->controller.cancel_save();
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (ui->controller.status().saving && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ImGui_ImplOpenGL3_Shutdown();
      ImGui_ImplGlfw_Shutdown();
      ImGui::DestroyContext();
      glfwDestroyWindow(window);
      glfwTerminate();
      std::fflush(nullptr);
      std::_Exit(exit_code);
    }
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}

}  // namespace luka::studio

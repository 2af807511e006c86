// Output panel: the generated text coloured by each token's probability, its perplexity, and the
// effective attention row of the selected layer and head at a decode step (a slider scrubs the
// steps, live or replayed).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/studio/views/ui_state.h"
#include "core/tokenizer/unicode.h"
#include "viz/heatmap.h"

namespace luka::studio {

namespace {

// Confidence colour: red (improbable) through amber to green (near certain).
ImVec4 confidence_colour(float p) {
  const float t = std::clamp(p, 0.f, 1.f);
  const ImVec4 lo(0.92f, 0.35f, 0.35f, 1), mid(0.92f, 0.78f, 0.35f, 1), hi(0.45f, 0.88f, 0.5f, 1);
  const auto mix = [](const ImVec4& a, const ImVec4& b, float f) {
    return ImVec4(a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f, a.z + (b.z - a.z) * f, 1);
  };
  return t < 0.5f ? mix(lo, mid, t * 2) : mix(mid, hi, (t - 0.5f) * 2);
}

// A tokenizer's special token as a piece: "<|im_end|>", "<|endoftext|>", "<s>", "</s>".
bool is_special_piece(const std::string& piece) {
  if (piece.size() >= 4 && piece.compare(0, 2, "<|") == 0 && piece.compare(piece.size() - 2, 2, "|>") == 0) return true;
  return piece == "<s>" || piece == "</s>" || piece == "<unk>" || piece == "<pad>";
}

// The generated tokens, each coloured by the probability the model gave it, wrapped by hand
// (ImGui wraps only whole single-colour texts); hovering shows the probability.
void coloured_tokens(UiState& ui, const std::vector<capture::Token>& tokens) {
  const float width = ImGui::GetContentRegionAvail().x;
  float x = 0;
  double nll = 0;
  int counted = 0;
  for (std::size_t i = 0; i < tokens.size();) {
    if (!tokens[i].generated) {
      ++i;
      continue;
    }
    // Tokens that only together make whole characters (byte-level BPE splits emoji, Hebrew and
    // Arabic letters) are shown as one: up to 4 tokens until the bytes are valid UTF-8, coloured by
    // the least probable; a run that never completes stays token by token, as bytes.
    std::size_t j = i + 1;
    std::string bytes = tokens[i].piece;
    if (!unicode::is_valid_utf8(bytes)) {
      std::string more = bytes;
      for (std::size_t k = i + 1; k < tokens.size() && k < i + 4 && tokens[k].generated; ++k) {
        more += tokens[k].piece;
        if (unicode::is_valid_utf8(more)) {
          bytes = more;
          j = k + 1;
          break;
        }
      }
    }
    float p = tokens[i].prob;
    for (std::size_t k = i + 1; k < j; ++k)
      if (!(tokens[k].prob >= p)) p = tokens[k].prob;  // the least probable (NaN wins: unknown)
    // Line breaks break the line, each marked by a faint ⏎; a special token (<|im_end|>) is drawn
    // in a box, dimmed: neither is text the model wrote as such.
    const bool special = is_special_piece(bytes);
    const ImVec4 colour = std::isnan(p) ? ImVec4(0.8f, 0.8f, 0.8f, 1) : confidence_colour(p);
    ImVec2 r0(1e30f, 1e30f), r1(-1e30f, -1e30f);
    bool hovered = false;
    const auto draw = [&](const std::string& text, const ImVec4& c, bool boxed) {
      const float w = ImGui::CalcTextSize(text.c_str()).x + (boxed ? 6 : 0);
      if (x > 0 && x + w > width) x = 0;
      else if (x > 0) ImGui::SameLine(0, 0);
      if (boxed) {
        const ImVec2 at = ImGui::GetCursorScreenPos();
        const ImVec2 ts = ImGui::CalcTextSize(text.c_str());
        ImGui::GetWindowDrawList()->AddRect(ImVec2(at.x + 1, at.y), ImVec2(at.x + ts.x + 5, at.y + ts.y),
                                            IM_COL32(150, 150, 160, 160), 3.f);
        ImGui::SetCursorScreenPos(ImVec2(at.x + 3, at.y));
      }
      ImGui::TextColored(c, "%s", text.c_str());
      if (boxed) {
        ImGui::SameLine(0, 0);
        ImGui::Dummy(ImVec2(3, ImGui::GetTextLineHeight()));
      }
      const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
      r0 = ImVec2(std::min(r0.x, a.x), std::min(r0.y, a.y));
      r1 = ImVec2(std::max(r1.x, b.x), std::max(r1.y, b.y));
      hovered |= ImGui::IsItemHovered();
      x += w;
    };
    if (special) {
      draw(bytes, ImVec4(0.62f, 0.62f, 0.68f, 1), true);
    } else {
      std::size_t from = 0;
      for (std::size_t nl = bytes.find('\n'); ; nl = bytes.find('\n', from)) {
        const std::string part = bytes.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
        if (!part.empty()) draw(token_label(part), colour, false);  // a partial character shows as its bytes
        if (nl == std::string::npos) break;
        draw("\u23CE", ImVec4(0.5f, 0.5f, 0.55f, 0.7f), false);
        x = 0;  // the next piece starts a line
        from = nl + 1;
      }
    }
    ui.mark_drawn("output_token/" + std::to_string(i), r0.x, r0.y, r1.x, r1.y, special ? "special" : "");
    if (hovered) {
      ui.selection.hover_token = static_cast<std::int64_t>(i);  // the map marks the row that produced it
      if (j == i + 1 && !std::isnan(p)) {
        ImGui::SetTooltip("p = %.4f (its attention row is marked on the map)", p);
      } else if (j > i + 1) {
        std::string tip = std::to_string(j - i) + " tokens make this character:";
        for (std::size_t k = i; k < j; ++k) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "\n  %s  p = %.4f", token_label(tokens[k].piece).c_str(), tokens[k].prob);
          tip += buf;
        }
        ImGui::SetTooltip("%s", tip.c_str());
      }
    }
    for (std::size_t k = i; k < j; ++k)
      if (!std::isnan(tokens[k].prob) && tokens[k].prob > 0) {
        nll -= std::log(static_cast<double>(tokens[k].prob));
        ++counted;
      }
    i = j;
  }
  if (counted) ImGui::TextDisabled("%d generated tokens: mean NLL %.3f, perplexity %.2f (their own probabilities)", counted, nll / counted,
                                   std::exp(nll / counted));
}

}  // namespace

void draw_output_panel(UiState& ui) {
  const auto view = ui.controller.view();
  if (!view) {
    draw_display_text(ui.display_text, ui.controller.output());
    return;
  }
  const std::string ck = capture_key(view.get());
  coloured_tokens(ui, ui.tokens.get(ui.tasks, ck, [view] { return view->tokens(); }));
  const capture::Summary sum = view->summary();
  if (sum.complete_steps == 0) return;
  int step = static_cast<int>(ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, sum.complete_steps) : sum.complete_steps);
  ImGui::SetNextItemWidth(-80);
  if (ImGui::SliderInt("step", &step, 1, static_cast<int>(sum.complete_steps))) ui.selection.step = step;
  if (!sum.layout.rows) return;
  try {
    const std::string key = ck + "/" + std::to_string(step) + "/" + std::to_string(ui.selection.layer) + "/" + std::to_string(ui.selection.head);
    const int layer = ui.selection.layer, head = ui.selection.head;
    const std::vector<float>& row = ui.output.row.get(ui.tasks, key, [view, step, layer, head] { return view->row(step, layer, head); });
    const std::string& label = ui.output.row_label.get(ui.tasks, key, [view, step, layer, head] {
      const capture::StepMetrics m = view->metrics(step, layer);
      return "step " + std::to_string(step) + ", layer " + std::to_string(layer) + " (" + capture::mode_name(m.mode) + "), head " +
             std::to_string(head) + ": effective attention over " + std::to_string(m.tokens) + " tokens";
    });
    if (row.empty()) return;
    ImGui::TextUnformatted(label.c_str());
    viz::HeatmapOptions o;
    o.scale.kind = viz::ColorScale::kLog;
    o.scale.vmin = 1e-4;
    const int w = static_cast<int>(std::max(1.f, ImGui::GetContentRegionAvail().x));
    static Texture strip;
    strip.upload(viz::render_heatmap(row.data(), 1, static_cast<std::int64_t>(row.size()), w, 1, o));
    ImGui::Image(strip.id(), ImVec2(static_cast<float>(w), 16));
  } catch (const std::exception& e) {
    ImGui::TextDisabled("%s", e.what());
  }
}

}  // namespace luka::studio

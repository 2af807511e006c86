// Output panel: the generated text coloured by each token's probability, its perplexity, and the
// effective attention row of the selected layer and head at a decode step (a slider scrubs the
// steps, live or replayed).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/studio/ui_state.h"
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
    const std::string piece = token_label(bytes);  // a partial character shows as its bytes
    const float w = ImGui::CalcTextSize(piece.c_str()).x;
    if (x > 0 && x + w > width) x = 0;
    else if (x > 0) ImGui::SameLine(0, 0);
    ImGui::TextColored(std::isnan(p) ? ImVec4(0.8f, 0.8f, 0.8f, 1) : confidence_colour(p), "%s", piece.c_str());
    const ImVec2 r0 = ImGui::GetItemRectMin(), r1 = ImGui::GetItemRectMax();
    ui.mark_drawn("output_token/" + std::to_string(i), r0.x, r0.y, r1.x, r1.y);
    if (ImGui::IsItemHovered()) {
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
    x += w;
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

// The Studio's settings that are one of a few values, as enums, and the words the session file
// (session_state.cpp) and scripts write them as. Each enum's Choices lists every value in the order
// the panels offer them, which is also the number an older session file stored (version 1 kept
// these settings as ints).
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "app/figures/capture_figure.h"
#include "core/model/dtype.h"
#include "core/model/model.h"

namespace luka::studio {

// The prompt panel's source of the prompt.
enum class PromptMode { kInterwoven, kFreeText };
// The map's layout: auto is decode rows for the dense and difference views once there are steps,
// else the full map.
enum class MapLayout { kAuto, kFull, kDecodeRows };
// What the map panel shows: the map, or small multiples (every head of the layer, the head in
// every layer).
enum class MapMode { kMap, kHeadGrid, kLayerStrip };
// What the Head scores tab's table is computed from.
enum class HeadScoreSource { kPrefill, kDecode, kCalibration };

template <class E>
struct Choice {
  E value;
  const char* word;
};

template <class E>
struct Choices;  // static constexpr Choice<E> all[]

template <>
struct Choices<PromptMode> {
  static constexpr Choice<PromptMode> all[] = {{PromptMode::kInterwoven, "interwoven"}, {PromptMode::kFreeText, "free_text"}};
};
template <>
struct Choices<MapLayout> {
  static constexpr Choice<MapLayout> all[] = {{MapLayout::kAuto, "auto"}, {MapLayout::kFull, "full"}, {MapLayout::kDecodeRows, "rows"}};
};
template <>
struct Choices<MapMode> {
  static constexpr Choice<MapMode> all[] = {{MapMode::kMap, "map"}, {MapMode::kHeadGrid, "heads"}, {MapMode::kLayerStrip, "layers"}};
};
template <>
struct Choices<HeadScoreSource> {
  static constexpr Choice<HeadScoreSource> all[] = {
      {HeadScoreSource::kPrefill, "prefill"}, {HeadScoreSource::kDecode, "decode"}, {HeadScoreSource::kCalibration, "calibration"}};
};
// Enums of the layers below, as the Studio offers them.
template <>
struct Choices<DType> {  // fp16 computes on the GPU only
  static constexpr Choice<DType> all[] = {{DType::kF32, "fp32"}, {DType::kBF16, "bf16"}, {DType::kF16, "fp16"}};
};
template <>
struct Choices<WeightFormat> {
  // auto last: version-1 session files stored the index of the first two.
  static constexpr Choice<WeightFormat> all[] = {
      {WeightFormat::kDequantized, "dequantized"}, {WeightFormat::kQuantized, "quantized"}, {WeightFormat::kAuto, "auto"}};
};
template <>
struct Choices<figures::MapView> {
  static constexpr Choice<figures::MapView> all[] = {
      {figures::MapView::kEffective, "effective"}, {figures::MapView::kDense, "dense"}, {figures::MapView::kDifference, "difference"}};
};

template <class E>
constexpr std::size_t choice_count() {
  return std::size(Choices<E>::all);
}

// The value's place in Choices<E>::all (what a combo box shows selected).
template <class E>
int choice_index(E v) {
  for (std::size_t i = 0; i < choice_count<E>(); ++i)
    if (Choices<E>::all[i].value == v) return static_cast<int>(i);
  return 0;
}

// The value at `index`, or nullopt out of range (an older session file's number).
template <class E>
std::optional<E> choice_at(long long index) {
  if (index < 0 || index >= static_cast<long long>(choice_count<E>())) return std::nullopt;
  return Choices<E>::all[index].value;
}

template <class E>
const char* choice_word(E v) {
  return Choices<E>::all[choice_index(v)].word;
}

// The value a word names, or nullopt for any other word.
template <class E>
std::optional<E> parse_choice(std::string_view word) {
  for (const Choice<E>& c : Choices<E>::all)
    if (word == c.word) return c.value;
  return std::nullopt;
}

// "a, b or c": the words of E, for error messages.
template <class E>
std::string choice_words() {
  std::string out;
  for (std::size_t i = 0; i < choice_count<E>(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == choice_count<E>() ? " or " : ", ") + Choices<E>::all[i].word;
  return out;
}

}  // namespace luka::studio

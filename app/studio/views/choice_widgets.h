// ImGui widgets over the Studio's enum settings (choices.h): a combo box and radio buttons that
// read and write the enum itself, with the labels the panel shows.
#pragma once

#include <imgui.h>

#include <cstddef>

#include "app/studio/data/choices.h"

namespace luka::studio {

// `labels`: one per value of E, in the order of Choices<E>::all.
template <class E, std::size_t N>
bool choice_combo(const char* id, E& value, const char* const (&labels)[N]) {
  static_assert(N == choice_count<E>(), "a label for every choice");
  int i = choice_index(value);
  if (!ImGui::Combo(id, &i, labels, static_cast<int>(N))) return false;
  value = *choice_at<E>(i);
  return true;
}

template <class E>
bool choice_radio(const char* label, E& value, E option) {
  if (!ImGui::RadioButton(label, value == option)) return false;
  value = option;
  return true;
}

}  // namespace luka::studio

// The cover-state colours against the topic palette: a state never looks like a topic (the
// "refined" colour was topic B's orange) and the states are told apart, measured as Euclidean
// distance in OKLab (about 0.01 per just-noticeable difference; topics B and F, orange and
// vermilion, are 0.12 apart).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/prompt/interwoven_prompt.h"
#include "viz/colormap.h"
#include "viz/state_colours.h"
#include "viz/ui_colours.h"

namespace luka::viz {
namespace {

double distance(Rgb x, Rgb y) {
  const OkLab a = to_oklab(x), b = to_oklab(y);
  return std::sqrt((a.L - b.L) * (a.L - b.L) + (a.a - b.a) * (a.a - b.a) + (a.b - b.b) * (a.b - b.b));
}

Rgb hex(const std::string& h) {
  const unsigned long v = std::stoul(h.substr(1), nullptr, 16);
  return {static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v)};
}

TEST(StateColours, ApartFromEveryTopicColourAndFromEachOther) {
  for (const StateColour& s : kCoverStateColours)
    for (int topic = 0; topic < 8; ++topic) {
      const std::string& t = default_topic_colour(topic);
      EXPECT_GE(distance(s.rgb, hex(t)), 0.08) << s.name << " against topic " << static_cast<char>('A' + topic) << " " << t;
    }
  for (std::size_t i = 0; i < kCoverStateColours.size(); ++i)
    for (std::size_t j = i + 1; j < kCoverStateColours.size(); ++j)
      EXPECT_GE(distance(kCoverStateColours[i].rgb, kCoverStateColours[j].rgb), 0.05)
          << kCoverStateColours[i].name << " against " << kCoverStateColours[j].name;
  // The timeline's "differs" mark (compare mode) is none of the states, nor a topic.
  for (const StateColour& s : kCoverStateColours) EXPECT_GE(distance(kStateDiffersColour, s.rgb), 0.1) << "differs against " << s.name;
  for (int topic = 0; topic < 8; ++topic) EXPECT_GE(distance(kStateDiffersColour, hex(default_topic_colour(topic))), 0.1) << "differs against topic " << topic;
  // Kascade's marks on the map sit beside the refined pages' and heavy hitters' marks.
  EXPECT_GE(distance(kKascadeColour, kRefinedColour), 0.1);
  EXPECT_GE(distance(kKascadeColour, kHeavyHitterColour), 0.1);
  EXPECT_GE(distance(kKascadeColour, kCoverStateColours[3].rgb), 0.05);  // raw
  // The old refined orange was next to topic B's.
  EXPECT_LT(distance({240, 160, 40}, hex(default_topic_colour(1))), 0.08);
}

// The Studio's controls (Dear ImGui's dark style is blue, next to topics A and E) are neutral:
// apart from every topic and cover state.
TEST(UiColours, ApartFromEveryTopicAndStateColour) {
  for (const UiColour& u : kUiColours) {
    for (int topic = 0; topic < 8; ++topic) {
      const std::string& t = default_topic_colour(topic);
      EXPECT_GE(distance(u.rgb, hex(t)), 0.08) << u.name << " against topic " << static_cast<char>('A' + topic) << " " << t;
    }
    for (const StateColour& s : kCoverStateColours)
      if (std::string(s.name) != "absent" && std::string(s.name) != "dropped")  // the map's background greys
        EXPECT_GE(distance(u.rgb, s.rgb), 0.03) << u.name << " against " << s.name;
  }
  // The compare mode's signs of B - A: apart from every topic and from each other.
  for (const Rgb d : {kDeltaHigher, kDeltaLower})
    for (int topic = 0; topic < 8; ++topic)
      EXPECT_GE(distance(d, hex(default_topic_colour(topic))), 0.08) << "delta colour against topic " << static_cast<char>('A' + topic);
  EXPECT_GE(distance(kDeltaHigher, kDeltaLower), 0.1);
  // Dear ImGui's own button blue was next to topic E's sky blue.
  EXPECT_LT(distance({66, 150, 250}, hex(default_topic_colour(4))), 0.15);
}

}  // namespace
}  // namespace luka::viz

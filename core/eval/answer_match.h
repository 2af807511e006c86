// Scoring a short answer against gold answers the way the LuKA paper's WikiSalad table does:
// "lenient exact match". Both sides are normalized (lower case, punctuation, the articles a / an /
// the and extra spaces removed); the prediction matches a gold answer when the two are equal or
// either contains the other. A question without gold answers (SQuAD v2's unanswerable ones)
// scores 0 whatever the prediction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace luka::eval {

// Lower case (Unicode, ICU's root locale), every punctuation character (Unicode category P, and
// the ASCII symbols Python's string.punctuation has outside it: $ + < = > ^ ` | ~) replaced by
// nothing, the words "a", "an", "the" dropped, and the remaining words joined by one space.
std::string normalize_answer(std::string_view text);

// `s` without the whitespace (space, \t, \n, \r, \f, \v) at either end: a generated answer as scored.
std::string strip_space(std::string_view s);

// True when normalize_answer(prediction) equals, contains or is contained in the normalization of
// one of `golds`. An empty normalized side never matches (every string contains ""), so an empty
// prediction, or a gold answer that is only punctuation and articles, scores 0.
bool lenient_match(std::string_view prediction, const std::vector<std::string>& golds);

}  // namespace luka::eval

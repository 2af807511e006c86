#include "core/util/error.h"

namespace luka {

void fail(const std::string& where, const std::string& what) {
  throw Error(where.empty() ? what : where + ": " + what);
}

}  // namespace luka

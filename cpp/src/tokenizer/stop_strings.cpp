#include "tokenizer/stop_strings.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace qd {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_)
    if (s.empty()) throw ArgError("stop strings must not be empty");
}

std::string StopStrings::push(const std::string& text) {
  if (stopped_) return {};
  held_ += text;
  if (stops_.empty()) return std::exchange(held_, {});
  // The earliest occurrence of any stop string ends the text.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest tail of held_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > hold; n--) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStrings::flush() {
  if (stopped_) return {};
  return std::exchange(held_, {});
}

}  // namespace qd

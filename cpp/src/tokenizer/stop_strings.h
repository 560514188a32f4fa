// Stop strings over streamed text: a stop string may span several tokens and several chunks,
// and its text is never emitted. Text that could be the start of a stop string is held back
// until the next piece shows whether it is one.
#pragma once
#include <string>
#include <vector>

namespace qd {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // Appends text; returns the part that is now safe to emit. After a stop string is found,
  // stopped() is true, the text before it is returned and everything after is dropped.
  std::string push(const std::string& text);
  // End of generation: releases the held-back text (nothing after a stop).
  std::string flush();
  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace qd

// How cairn writes to the user's terminal: trial output prefixed with the trial id, cairn's
// own notes, colour only on a terminal and never when NO_COLOR is set (SPEC §1).
#pragma once

#include <string>
#include <string_view>

namespace cairn {

class Terminal {
 public:
  Terminal();  // detects whether stdout is a terminal and honours NO_COLOR
  bool colour() const { return colour_; }
  bool is_tty() const { return tty_; }
  // One line of a trial's output: "[7.3] text".
  void trial_line(std::string_view trial_id, std::string_view line) const;
  // A note from cairn itself: "cairn: text".
  void note(std::string_view text) const;
  // A warning or error, on stderr.
  void warn(std::string_view text) const;

 private:
  bool tty_ = false;
  bool colour_ = false;
};

}  // namespace cairn

// How cairn writes to the user's terminal: trial output prefixed with the trial id, cairn's
// own notes, colour only on a terminal and never when NO_COLOR is set (SPEC §1), and on a
// terminal the live status line (status_line.h) kept below what scrolls.
//
// The status line is drawn only when stdout is a terminal (and TERM is not "dumb"): piped
// output stays plain lines without control characters. It is redrawn at most
// kStatusRedrawsPerSecond times a second, at the terminal's width read at each redraw, and
// at once after a resize (SIGWINCH, which the coordinator's signal pipe catches); every line
// written through this class first clears it and draws it again below, in one write.
//
// A terminal made narrower than the line already drawn reflows it onto several rows (VTE,
// kitty, iTerm2, Windows Terminal, tmux): clearing only the cursor's row would leave the
// others behind. So the clear is status_clear(): the line's columns and the width now say
// how many rows it occupies, and all of them are cleared. A terminal that cuts lines instead
// of reflowing them (xterm) keeps the line on one row, and that clear then also wipes the row
// of output above it from the screen, once per shrink (the scrollback keeps it).
//
// Thread-safety: the coordinator's thread only. The status line is this object's own
// state, so the output methods stay const for their callers.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "engine/coordinator/status_line.h"

namespace cairn {

// What clears a status line of `columns` columns, the cursor at its end, on a terminal
// `width` columns wide: "\r\x1b[K", and when the line takes more than one row at that width
// (the terminal shrank and reflowed it), then up to its first row and clear to the end of
// the screen ("\x1b[<n>A\x1b[J").
std::string status_clear(int columns, int width);

class Terminal {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kStatusRedrawsPerSecond = 4;

  Terminal();   // detects whether stdout is a terminal and honours NO_COLOR
  ~Terminal();  // clears the status line
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;
  bool colour() const { return colour_; }
  bool is_tty() const { return tty_; }
  // One line of a trial's output: "[7.3] text".
  void trial_line(std::string_view trial_id, std::string_view line) const;
  // A note from cairn itself: "cairn: text".
  void note(std::string_view text) const;
  // A warning or error, on stderr.
  void warn(std::string_view text) const;

  // True when a status line is drawn here and a redraw is due: the caller then gathers the
  // facts and calls draw_status().
  bool status_due() const;
  void draw_status(const StatusFacts& facts) const;
  // The terminal's size changed (SIGWINCH): the next status_due() says yes, and what clears
  // the line counts the rows it occupies at the new width.
  void resized() const;
  // Clears the status line for good (the run is ending): later output is plain lines.
  void end_status() const;

 private:
  // Writes `text` (whole lines) with the status line cleared before and drawn again after.
  void write_around_status(std::FILE* stream, const std::string& text) const;
  int width() const;

  bool tty_ = false;
  mutable int width_ = 80;  // the terminal's width, as last read
  bool colour_ = false;
  mutable bool status_enabled_ = false;  // off for good after end_status()
  mutable std::string status_;           // the line as drawn, "" when none is
  mutable int status_columns_ = 0;       // its visible columns (it is plain ASCII)
  mutable Clock::time_point next_status_{};
};

}  // namespace cairn

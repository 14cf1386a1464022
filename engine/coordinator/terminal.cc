#include "engine/coordinator/terminal.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cairn {

Terminal::Terminal() {
  tty_ = ::isatty(STDOUT_FILENO) == 1;
  const char* no_colour = std::getenv("NO_COLOR");
  colour_ = tty_ && !(no_colour && *no_colour);
}

void Terminal::trial_line(std::string_view trial_id, std::string_view line) const {
  std::string out;
  out.reserve(line.size() + trial_id.size() + 16);
  if (colour_) out += "\033[36m";
  out += '[';
  out += trial_id;
  out += "] ";
  if (colour_) out += "\033[0m";
  out += line;
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void Terminal::note(std::string_view text) const {
  std::string out = colour_ ? "\033[1mcairn:\033[0m " : "cairn: ";
  out += text;
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void Terminal::warn(std::string_view text) const {
  std::fflush(stdout);
  std::string out = "cairn: ";
  out += text;
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace cairn

#include "engine/coordinator/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cairn {

namespace {
constexpr const char* kClearLine = "\r\033[K";
}

std::string status_clear(int columns, int width) {
  std::string out = kClearLine;
  if (width < 1) width = 1;
  const int rows = columns <= width ? 1 : (columns + width - 1) / width;
  if (rows > 1) out += "\033[" + std::to_string(rows - 1) + "A\033[J";
  return out;
}

void Terminal::resized() const {
  next_status_ = Clock::time_point{};
  width_ = width();
}

Terminal::Terminal() {
  tty_ = ::isatty(STDOUT_FILENO) == 1;
  const char* no_colour = std::getenv("NO_COLOR");
  colour_ = tty_ && !(no_colour && *no_colour);
  const char* term = std::getenv("TERM");
  status_enabled_ = tty_ && !(term && std::strcmp(term, "dumb") == 0);
  if (status_enabled_) width_ = width();
}

Terminal::~Terminal() {
  end_status();
}

int Terminal::width() const {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0)
    return std::atoi(columns);
  return 80;
}

void Terminal::write_around_status(std::FILE* stream, const std::string& text) const {
  if (status_.empty()) {
    std::fwrite(text.data(), 1, text.size(), stream);
    std::fflush(stream);
    return;
  }
  // Cleared and redrawn in one write to stdout where the text goes there too, so the line
  // never flickers; a warning on stderr goes between a clear and a redraw.
  std::string out = status_clear(status_columns_, width_);
  if (stream == stdout) {
    out += text;
    out += status_;
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
  std::fwrite(status_.data(), 1, status_.size(), stdout);
  std::fflush(stdout);
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
  write_around_status(stdout, out);
}

void Terminal::note(std::string_view text) const {
  std::string out = colour_ ? "\033[1mcairn:\033[0m " : "cairn: ";
  out += text;
  out += '\n';
  write_around_status(stdout, out);
}

void Terminal::warn(std::string_view text) const {
  std::string out = "cairn: ";
  out += text;
  out += '\n';
  std::fflush(stdout);
  write_around_status(stderr, out);
}

bool Terminal::status_due() const {
  return status_enabled_ && Clock::now() >= next_status_;
}

void Terminal::draw_status(const StatusFacts& facts) const {
  if (!status_enabled_) return;
  next_status_ = Clock::now() + std::chrono::milliseconds(1000 / kStatusRedrawsPerSecond);
  width_ = width();  // read at every redraw: a resize shows before its SIGWINCH arrives
  const std::string line = render_status_line(facts, width_);
  const std::string out =
      status_clear(status_columns_, width_) + (colour_ ? "\033[2m" + line + "\033[0m" : line);
  status_ = colour_ ? "\033[2m" + line + "\033[0m" : line;
  status_columns_ = static_cast<int>(line.size());
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void Terminal::end_status() const {
  status_enabled_ = false;
  if (status_.empty()) return;
  const std::string clear = status_clear(status_columns_, width());
  status_.clear();
  status_columns_ = 0;
  std::fwrite(clear.data(), 1, clear.size(), stdout);
  std::fflush(stdout);
}

}  // namespace cairn

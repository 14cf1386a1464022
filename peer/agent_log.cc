#include "peer/agent_log.h"

#include <time.h>
#include <unistd.h>

namespace cairn {

void agent_log(const std::string& line) {
  char stamp[32] = "";
  const time_t now = ::time(nullptr);
  struct tm utc {};
  if (::gmtime_r(&now, &utc)) ::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string text = std::string(stamp) + " cairn agent: ";
  // One line, whatever a peer put into the message.
  for (char c : line) text.push_back(c == '\n' || c == '\r' ? ' ' : c);
  text.push_back('\n');
  (void)!::write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace cairn

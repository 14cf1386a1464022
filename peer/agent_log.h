// The agent's log: one line per event on stderr, "2026-11-26T16:51:15Z cairn agent: …", each
// written whole with one write(2), so lines from connection threads never interleave and a
// journal (systemd) or a file sees complete lines.
//
// Thread-safety: safe to call from any thread.
#pragma once

#include <string>

namespace cairn {

void agent_log(const std::string& line);

}  // namespace cairn

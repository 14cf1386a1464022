#pragma once

// How long an agent waits on a silent coordinator before it takes the connection as gone.
//
// The coordinator asks each launcher connection for a heartbeat every second, and takes an
// agent it has not heard from for its heartbeat timeout as lost: it restarts that agent's
// trials elsewhere and, when the agent answers again, launches there anew. A partition that
// outlasts that timeout can also outlast the retransmissions of the coordinator's close, so
// the agent may never learn that the old connection ended: its ranks — orphans of ended
// attempts — would keep their slots, and the coordinator's next launch there would be
// refused for want of a free slot. The agent therefore drops a connection whose ranks run
// and from which it has heard nothing for as long as the coordinator waits for it, which
// kills those ranks as any ended connection does.
//
// Thread-safe (reads the environment only).

#include <chrono>

namespace cairn {

// CAIRN_HEARTBEAT_TIMEOUT (seconds, as the coordinator reads it) when set and valid, else
// the coordinator's default, 10 s.
std::chrono::milliseconds coordinator_silence_limit();

}  // namespace cairn

// What the coordinator tells the outside world about its experiment (`notify:` in the
// config, docs/config.md "notify"). The coordinator builds each event's JSON
// (notify_payload.h) and hands it to a Notifier, which delivers it elsewhere: the engine
// knows no HTTP; cli/webhook_sender.h is the implementation `run` and `resume` plug in.
//
// At least once, with no window for a kill: an event that reports a stored state change (a
// trial's ERROR, the experiment's end, a new best) is *prepared* before the commit that
// stores the change: the notifier keeps it where a kill cannot lose it but does not deliver
// it yet, and the coordinator writes the event's marker (schema::notify_key(id)) into that
// same commit (engine/coordinator/notify_outbox.h). After the commit, release() lets it go;
// a commit that failed discard()s it. A process killed in between leaves a prepared event
// that the next notifier on that experiment delivers exactly when its marker was committed.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"

namespace cairn {

class Notifier {
 public:
  virtual ~Notifier() = default;
  // Keeps `payload` durably as a pending event and returns its delivery id (the payload gets
  // it as `delivery_id`); "" when it could not be kept (said on stderr). Nothing is sent
  // before release(). Must return at once, whatever the network does.
  virtual std::string prepare(NotifyEvent event, Json payload) = 0;
  // The commit holding the events' markers is durable: deliver them, off this thread.
  virtual void release(const std::vector<std::string>& ids) = 0;
  // Their commit failed: the state they report was never stored; forget them.
  virtual void discard(const std::vector<std::string>& ids) = 0;
  // An event that reports no stored change (the coordinator stopping on an error of its
  // own): kept and delivered at once, unconditionally.
  virtual void notify(NotifyEvent event, Json payload) = 0;
};

}  // namespace cairn

// What the coordinator tells the outside world about its experiment (`notify:` in the
// config, docs/config.md "Notifications"). The coordinator builds each event's JSON
// (notify_payload.h) and hands it to a Notifier, which delivers it elsewhere: the engine
// knows no HTTP; cli/webhook_sender.h is the implementation `run` and `resume` plug in.
#pragma once

#include "common/json.h"
#include "engine/config/config.h"

namespace cairn {

class Notifier {
 public:
  virtual ~Notifier() = default;
  // Called on the coordinator's thread for each event the config asks for. Must return at
  // once, whatever the network does: delivery happens elsewhere, and a delivery that fails
  // never reaches back into the experiment.
  virtual void notify(NotifyEvent event, Json payload) = 0;
};

}  // namespace cairn

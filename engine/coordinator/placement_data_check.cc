#include "engine/coordinator/placement_data_check.h"

namespace cairn {

std::future<Status> start_data_check(const AgentEndpoint& agent,
                                     std::shared_ptr<const RunSource> source) {
  if (!source) return {};
  if (source->data_damaged.ok()) {
    const DataPlan plan = plan_data(*source);
    if (plan.check_entries.empty() && plan.check_files.empty()) return {};
  }
  return std::async(std::launch::async, [agent, source = std::move(source)] {
    return check_data_on_agent(agent.address, agent.tls, *source,
                               std::chrono::steady_clock::now() + kDataCheckTimeout);
  });
}

}  // namespace cairn

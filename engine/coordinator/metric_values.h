// Metric values are JSON numbers or null (docs/protocol.md). Clients other than the
// Python SDK (the C++ SDK, raw protocol clients) may still send a string or a list; the
// coordinator must not store those, since every reader (`cairn metrics --csv`, the
// searcher, `cairn best`) expects numbers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"

namespace cairn {

// "'loss' is a string": what is wrong with one metric value that is not a number or null.
std::string describe_non_numeric_metric(const std::string& name, const Json& value);

// The metrics of `metrics` (an object) whose values are not numbers or null, described as
// above, in order.
std::vector<std::string> non_numeric_metrics(const Json& metrics);

// True when every report's "metrics" in the training batch (the line as the client sent
// it) holds only numbers and nulls. A quick scan without building a document, since
// training batches are most of the traffic: false also means "cannot tell cheaply"
// (escaped keys, malformed JSON), for the caller to parse the batch and look closer.
bool training_batch_is_numeric(std::string_view batch);

// Removes every value that is not a number or null from the reports' metrics of a parsed
// training batch; returns what was removed, each metric name once, described as above.
std::vector<std::string> drop_non_numeric_metrics(Json& batch);

}  // namespace cairn

#include "store/experiment_ids.h"

namespace cairn {

Result<ParsedId> parse_id(const std::string& text) {
  ParsedId id;
  auto bad = [&] {
    return Status::BadInput("'" + text + "' is not an experiment id (7) or a trial id (7.3)");
  };
  auto dot = text.find('.');
  auto parse_number = [](const std::string& s, int64_t* out) {
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *out = std::stoll(s);
    return *out > 0;
  };
  if (!parse_number(text.substr(0, dot), &id.experiment)) return bad();
  if (dot != std::string::npos && !parse_number(text.substr(dot + 1), &id.trial)) return bad();
  return id;
}

}  // namespace cairn

// Plain aligned text tables for terminal output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/number_text.h"

namespace cairn::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// "a, b, c and 2 more": the first `shown` names, then how many more; how a list of files
// (changed, added, …) is named in a message.
std::string name_list(const std::vector<std::string>& names, size_t shown);

using cairn::format_number;  // common/number_text.h

}  // namespace cairn::cli

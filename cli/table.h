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

using cairn::format_number;  // common/number_text.h

}  // namespace cairn::cli

// CSV output (RFC 4180), for `cairn metrics --csv`: metric names are any string a trial
// chose, so a field may hold a comma, a quote or a line break.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cairn::cli {

// The field as is when it needs no quoting, else in double quotes with quotes doubled.
std::string csv_field(std::string_view field);

// One record: the fields quoted as needed, joined by commas, ended by "\n" rather than
// RFC 4180's CRLF, as the output always was (every CSV reader accepts both).
std::string csv_record(const std::vector<std::string>& fields);

}  // namespace cairn::cli

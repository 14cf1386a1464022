// Runs a Gloo call, turning what it throws into false and a one-line message: Gloo
// reports every failure (timeout, closed connection, bad address) as an exception, and no
// exception may leave the SDK. Needs Gloo's headers (Debian: libgloo-dev).
#pragma once

#include <gloo/common/error.h>

#include <exception>
#include <string>

#include "cairn/detail/sigpipe_block.hpp"

namespace cairn::sdk_detail {

// Gloo's messages start with "[file:line] "; users need the rest, on one line.
inline std::string gloo_message(const char* what) {
  std::string msg = what;
  if (!msg.empty() && msg[0] == '[') {
    const auto end = msg.find("] ");
    if (end != std::string::npos) msg.erase(0, end + 2);
  }
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  return msg;
}

// Runs fn with SIGPIPE blocked; false with *error = "gloo <what>: …" when it throws.
template <typename Fn>
bool gloo_guarded(const char* what, Fn&& fn, std::string* error) {
  SigpipeBlock block;
  std::string problem;
  try {
    fn();
    return true;
  } catch (const ::gloo::Exception& e) {
    problem = gloo_message(e.what());
  } catch (const std::exception& e) {
    problem = e.what();
  } catch (...) {
    problem = "unknown error";
  }
  if (error) *error = std::string("gloo ") + what + ": " + problem;
  return false;
}

}  // namespace cairn::sdk_detail

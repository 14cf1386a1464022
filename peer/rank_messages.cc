#include "peer/rank_messages.h"

#include <filesystem>
#include <system_error>

#include "common/file_util.h"
#include "common/utf8.h"
#include "peer/control_frames.h"

namespace cairn {

Json launch_message(const RemoteLaunch& launch) {
  Json message{{"type", "launch"},
               {"rank", launch.rank},
               {"argv", launch.argv},
               {"env", launch.env},
               {"cwd", launch.cwd}};
  if (!launch.paths.empty()) message["paths"] = launch.paths;
  if (launch.self_program) message["program"] = "cairn";
  if (launch.output_at >= 0) message["output_at"] = launch.output_at;
  return message;
}

Json output_message(int64_t rank, std::string_view bytes) {
  // Text when it can be: that is what almost every piece is, readable in a frame dump and
  // a third smaller than base64. The JSON encoder would replace any other byte with U+FFFD.
  if (is_utf8(bytes)) return Json{{"type", "output"}, {"rank", rank}, {"data", bytes}};
  return Json{{"type", "output"}, {"rank", rank}, {"bytes", base64_encode(bytes)}};
}

Result<std::string> output_bytes(const Json& message) {
  auto data = message.find("data");
  auto bytes = message.find("bytes");
  if ((data == message.end()) == (bytes == message.end()))
    return Status::BadInput("bad output frame: it needs one of \"data\" and \"bytes\"");
  if (data != message.end()) {
    if (!data->is_string()) return Status::BadInput("bad output frame: \"data\" is not text");
    return data->get<std::string>();
  }
  if (!bytes->is_string()) return Status::BadInput("bad output frame: \"bytes\" is not base64");
  auto decoded = base64_decode(bytes->get<std::string>());
  if (!decoded.ok()) return Status::BadInput("bad output frame: \"bytes\" is not base64");
  return decoded;
}

Result<RemoteLaunch> parse_launch(const Json& message) {
  auto bad = [](const std::string& why) { return Status::BadInput("bad launch: " + why); };
  auto no_nul = [](const std::string& s) { return s.find('\0') == std::string::npos; };
  RemoteLaunch launch;
  auto rank = message.find("rank");
  if (rank == message.end() || !rank->is_number_integer() || rank->get<int64_t>() < 0)
    return bad("no rank (a non-negative integer)");
  launch.rank = rank->get<int64_t>();
  auto argv = message.find("argv");
  if (argv == message.end() || !argv->is_array() || argv->empty())
    return bad("argv is not a non-empty array");
  if (argv->size() > kMaxLaunchArgs)
    return bad("more than " + std::to_string(kMaxLaunchArgs) + " arguments");
  for (const Json& arg : *argv) {
    if (!arg.is_string() || !no_nul(arg.get<std::string>()))
      return bad("an argument is not a string");
    launch.argv.push_back(arg.get<std::string>());
  }
  auto env = message.find("env");
  if (env == message.end() || !env->is_object()) return bad("env is not an object");
  if (env->size() > kMaxLaunchEnv)
    return bad("more than " + std::to_string(kMaxLaunchEnv) + " variables");
  for (const auto& [name, value] : env->items()) {
    if (name.empty() || name.find('=') != std::string::npos || !no_nul(name) ||
        !value.is_string() || !no_nul(value.get<std::string>()))
      return bad("env has a variable that is not NAME=text");
    launch.env[name] = value.get<std::string>();
  }
  auto cwd = message.find("cwd");
  if (cwd == message.end() || !cwd->is_string()) return bad("no cwd");
  launch.cwd = cwd->get<std::string>();
  if (!no_nul(launch.cwd) || !stays_below(std::filesystem::path(launch.cwd)))
    return bad("cwd '" + launch.cwd.substr(0, 200) +
               "' is not a relative path below the agent's work directory");
  auto paths = message.find("paths");
  if (paths != message.end()) {
    if (!paths->is_object() || paths->size() > 64) return bad("paths is not an object");
    for (const auto& [name, kind] : paths->items()) {
      if (name.empty() || name.find('=') != std::string::npos || !no_nul(name) || !kind.is_string())
        return bad("paths has an entry that is not NAME: kind");
      bool known = false;
      for (const char* k : kLaunchPathKinds) known = known || kind.get<std::string>() == k;
      if (!known)
        return bad("paths names an unknown kind '" + kind.get<std::string>().substr(0, 64) + "'");
      launch.paths[name] = kind.get<std::string>();
    }
  }
  if (auto program = message.find("program"); program != message.end()) {
    if (!program->is_string() || program->get<std::string>() != "cairn")
      return bad("program is not \"cairn\" (the only one an agent substitutes)");
    launch.self_program = true;
  }
  if (auto at = message.find("output_at"); at != message.end()) {
    if (!at->is_number_integer() || at->get<int64_t>() < 0)
      return bad("output_at is not a non-negative integer");
    launch.output_at = at->get<int64_t>();
  }
  return launch;
}

void use_own_program(RemoteLaunch& launch) {
  if (!launch.self_program || launch.argv.empty()) return;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  // A binary removed or replaced since the agent started reads "PATH (deleted)"; the link
  // itself still executes the agent's own image.
  const bool same = !ec && std::filesystem::equivalent(self, "/proc/self/exe", ec) && !ec;
  launch.argv[0] = same ? self.string() : "/proc/self/exe";
}

}  // namespace cairn

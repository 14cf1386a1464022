// `entrypoint`: the trial's argv. There is no shell between cairn and the trial (SPEC §4),
// so a string is split into words the way a shell would, but nothing in it is expanded.
#include <string>
#include <vector>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"

namespace cairn::config {
namespace {

constexpr std::string_view kBuiltinMlp = "builtin:mlp";

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_shell_operator(char c) {
  return std::string_view("|;&<>()").find(c) != std::string_view::npos;
}

// Inside double quotes a backslash escapes only these (POSIX), and stays otherwise.
bool escapable_in_double_quotes(char c) {
  return c == '$' || c == '`' || c == '"' || c == '\\' || c == '\n';
}

void check_builtin(const std::vector<std::string>& argv, const ConfigNode& node) {
  if (!argv[0].starts_with("builtin:")) return;
  if (argv[0] != kBuiltinMlp) {
    fail(node, "entrypoint",
         "unknown built-in trainer '" + argv[0] + "'; the one built in is builtin:mlp");
  }
  if (argv.size() > 1) {
    fail(node, "entrypoint", "builtin:mlp takes no arguments; set its options as hyperparameters");
  }
}

std::vector<std::string> read_list(const ConfigNode& node) {
  if (node.items.empty()) {
    fail(node, "entrypoint", "is an empty list; give the program and its arguments");
  }
  std::vector<std::string> argv;
  for (size_t i = 0; i < node.items.size(); ++i) {
    argv.push_back(read_scalar_text(node.items[i], "entrypoint[" + std::to_string(i) + "]"));
  }
  if (argv[0].empty()) fail(node.items[0], "entrypoint[0]", "the program name is empty");
  return argv;
}

}  // namespace

Result<std::vector<std::string>> split_command_words(std::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // so that '' makes an empty word
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (is_blank(c)) {
      if (in_word) words.push_back(std::move(word)), word.clear();
      in_word = false;
      continue;
    }
    if (c == '\\' && i + 1 < command.size() && command[i + 1] == '\n') {
      ++i;  // backslash-newline joins lines and makes no word of its own
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == command.size()) return Status::BadInput("ends with a lone backslash");
      word += command[i];
    } else if (c == '\'') {
      size_t close = command.find('\'', i + 1);
      if (close == std::string_view::npos) return Status::BadInput("a single quote is not closed");
      word += command.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      for (++i; i < command.size() && command[i] != '"'; ++i) {
        bool escape = command[i] == '\\' && i + 1 < command.size() &&
                      escapable_in_double_quotes(command[i + 1]);
        if (escape && command[++i] == '\n') continue;
        word += command[i];
      }
      if (i == command.size()) return Status::BadInput("a double quote is not closed");
    } else if (is_shell_operator(c)) {
      return Status::BadInput(std::string("'") + c +
                              "' is shell syntax, but the entrypoint runs without a shell; "
                              "quote it, or use [sh, -c, '…'] to run a shell");
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::vector<std::string> read_entrypoint(const ConfigNode& node) {
  std::vector<std::string> argv;
  if (node.kind == ConfigNode::Kind::kList) {
    argv = read_list(node);
  } else if (node.kind == ConfigNode::Kind::kScalar) {
    Result<std::vector<std::string>> words = split_command_words(read_string(node, "entrypoint"));
    if (!words.ok()) fail(node, "entrypoint", words.status().message());
    argv = std::move(words).value();
    if (argv.empty() || argv[0].empty()) {
      fail(node, "entrypoint", "is empty; give the command that starts a trial");
    }
  } else {
    fail(node, "entrypoint", "expected a command (a string or a list), got " + describe(node));
  }
  check_builtin(argv, node);
  return argv;
}

}  // namespace cairn::config

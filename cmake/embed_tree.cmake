# Turns the files of a directory tree into one C++ source holding a table of
# {relative path, content} named SYMBOL (common/embedded.h: EmbeddedFile), so the binary
# carries a whole Python package (the `determined` package written beside the SDK).
# FILES is the list of paths relative to ROOT, separated by ",".
string(REPLACE "," ";" files "${FILES}")
set(body "// Generated from ${ROOT}; do not edit.\n#include \"common/embedded.h\"\nnamespace cairn {\n")
set(table "")
set(i 0)
foreach(rel ${files})
  file(READ ${ROOT}/${rel} content)
  string(APPEND body "static constexpr std::string_view ${SYMBOL}_${i} = R\"CAIRN_EMBED(${content})CAIRN_EMBED\";\n")
  string(APPEND table "    {\"${rel}\", ${SYMBOL}_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "static constexpr EmbeddedFile ${SYMBOL}_files[] = {\n${table}};\n")
string(APPEND body "extern const std::span<const EmbeddedFile> ${SYMBOL};\n")
string(APPEND body "const std::span<const EmbeddedFile> ${SYMBOL}{${SYMBOL}_files};\n}  // namespace cairn\n")
file(WRITE ${OUTPUT} "${body}")

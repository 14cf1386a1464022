# Turns a text file into a C++ source holding it as a string_view named SYMBOL, so the
# binary carries it (the Python SDK, the shell completion scripts).
file(READ ${INPUT} CONTENT)
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\nnamespace cairn {\nextern const std::string_view ${SYMBOL};\nconst std::string_view ${SYMBOL} = R\"CAIRN_EMBED(${CONTENT})CAIRN_EMBED\";\n}  // namespace cairn\n")

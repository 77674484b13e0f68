# cmake -DINPUT=<file> -DOUTPUT=<file.cc> -DFUNCTION=<name> -P embed_text.cmake
# Writes a C++ source defining `std::string_view inac::southbound::<FUNCTION>()` that returns
# the bytes of INPUT (a raw string literal; the delimiter cannot occur in a P4Info text file).
file(READ ${INPUT} content)
string(FIND "${content}" ")inac_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter")
endif()
file(WRITE ${OUTPUT}.tmp
  "// Generated from ${INPUT} by southbound/embed_text.cmake. Do not edit.\n"
  "#include <string_view>\n\n"
  "namespace inac::southbound {\n\n"
  "std::string_view ${FUNCTION}() {\n"
  "  static constexpr char kText[] = R\"inac_embed(${content})inac_embed\";\n"
  "  return std::string_view(kText, sizeof(kText) - 1);\n"
  "}\n\n"
  "}  // namespace inac::southbound\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)

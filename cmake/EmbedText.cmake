# manypy_embed_text(INPUT OUTPUT SYMBOL): writes a header OUTPUT that defines
# `static const char SYMBOL[]` holding INPUT's text, regenerated when INPUT
# changes (configure dependency) and rewritten only if its content changed.
function(manypy_embed_text input output symbol)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${input})
  file(READ ${input} text)
  get_filename_component(name ${input} NAME)
  file(WRITE ${output}.tmp
    "// Generated from ${name} by CMake (cmake/EmbedText.cmake).\n#pragma once\n"
    "static const char ${symbol}[] = R\"MANYPY_EMBED(${text})MANYPY_EMBED\";\n")
  file(COPY_FILE ${output}.tmp ${output} ONLY_IF_DIFFERENT)
  file(REMOVE ${output}.tmp)
endfunction()

# manypy_embed_python_package(DIR PACKAGE OUTPUT SYMBOL MODULES m...): writes a
# header OUTPUT that defines `static const char* const SYMBOL[][2]`, the
# {name, text} of each module DIR/m.py as PACKAGE.m in the order given, then of
# the package itself (DIR/__init__.py) as PACKAGE: the order an interpreter
# must define them in (their imports find the ones before). Regenerated and
# rewritten as manypy_embed_text's header is.
function(manypy_embed_python_package dir package output symbol)
  cmake_parse_arguments(PARSE_ARGV 4 arg "" "" "MODULES")
  set(entries "")
  foreach(module IN LISTS arg_MODULES ITEMS __init__)
    set(input ${dir}/${module}.py)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${input})
    file(READ ${input} text)
    set(name ${package}.${module})
    if(module STREQUAL "__init__")
      set(name ${package})
    endif()
    string(APPEND entries "    {\"${name}\", R\"MANYPY_EMBED(${text})MANYPY_EMBED\"},\n")
  endforeach()
  file(WRITE ${output}.tmp
    "// Generated from ${package} by CMake (cmake/EmbedText.cmake).\n#pragma once\n"
    "static const char* const ${symbol}[][2] = {\n${entries}};\n")
  file(COPY_FILE ${output}.tmp ${output} ONLY_IF_DIFFERENT)
  file(REMOVE ${output}.tmp)
endfunction()

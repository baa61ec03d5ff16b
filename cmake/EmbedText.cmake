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

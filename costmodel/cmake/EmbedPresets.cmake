# cmake -DOUTPUT=file.inc -DPRESETS="a.json;b.json" -P EmbedPresets.cmake
# Writes one `{"name", R"zenpreset(<file text>)zenpreset"},` initializer per preset file.
set(content "// Generated from costmodel/presets by EmbedPresets.cmake; do not edit.\n")
foreach(preset ${PRESETS})
  get_filename_component(name ${preset} NAME_WE)
  file(READ ${preset} text)
  string(FIND "${text}" ")zenpreset\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${preset} contains the raw-string delimiter )zenpreset\"")
  endif()
  string(APPEND content "{\"${name}\", R\"zenpreset(${text})zenpreset\"},\n")
endforeach()
# Only rewrite when changed, so an unrelated reconfigure does not rebuild Cluster.cpp.
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} previous)
endif()
if(NOT "${previous}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()

# Writes DeviceProfiles.inc: one LETHE_DEVICE_PROFILE(name, json) line per
# devices/<name>.json, so the built-in profiles need no install path.
# Usage: cmake -DDEVICES_DIR=<dir> -DOUTPUT=<file> -P EmbedDeviceProfiles.cmake
file(GLOB profiles "${DEVICES_DIR}/*.json")
list(SORT profiles)
set(content "// Generated from devices/*.json by cmake/EmbedDeviceProfiles.cmake; do not edit.\n")
foreach(profile IN LISTS profiles)
  get_filename_component(name "${profile}" NAME_WE)
  file(READ "${profile}" text)
  if(text MATCHES "\\)lethe_json\"")
    message(FATAL_ERROR "${profile} contains the raw-string delimiter )lethe_json\"")
  endif()
  string(APPEND content "LETHE_DEVICE_PROFILE(\"${name}\", R\"lethe_json(${text})lethe_json\")\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "${content}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")

# Project wrappers around AddMLIR, in the manner of CIRCT's AddCIRCT.cmake.

# Generated docs land in ${PROJECT_BINARY_DIR}/docs/<output_directory>;
# scripts/update-docs.sh copies them into docs/ (a test checks they match).
function(lethe_add_doc td_filename output_file output_directory command)
  set(LLVM_TARGET_DEFINITIONS ${td_filename}.td)
  mlir_tablegen(${output_file}.md ${command} ${ARGN})
  set(GEN_DOC_FILE ${PROJECT_BINARY_DIR}/docs/${output_directory}${output_file}.md)
  add_custom_command(
    OUTPUT ${GEN_DOC_FILE}
    COMMAND ${CMAKE_COMMAND} -E copy
            ${CMAKE_CURRENT_BINARY_DIR}/${output_file}.md ${GEN_DOC_FILE}
    DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${output_file}.md)
  add_custom_target(${output_file}DocGen DEPENDS ${GEN_DOC_FILE})
  add_dependencies(lethe-doc ${output_file}DocGen)
endfunction()

# The static archives the libraries in ARGN link, transitively, in
# `out_archives` (those built here also in `out_targets`); glibc's libraries
# (rt, dl, m, ...) in `out_system`. Debian's MLIR libraries name libLLVM.so
# ("LLVM"): LLVM's static components `llvm_components` stand in for it. A
# shared library found by path (pkg-config's COIN-OR CBC, zlib) is replaced
# by the archive beside it (`<name>_pic.a` first); one without an archive,
# or a package target not found, is dropped (`out_dropped`), and the link,
# made with `-z defs`, fails if it was needed.
function(_lethe_static_closure out_archives out_targets out_system
         out_dropped llvm_components)
  set(pending ${ARGN})
  set(seen)
  set(archives)
  set(targets)
  set(system)
  set(dropped)
  # Not while(pending): a list whose last item ends in -NOTFOUND is false.
  while(TRUE)
    list(LENGTH pending count)
    if(count EQUAL 0)
      break()
    endif()
    list(POP_FRONT pending item)
    # MLIR's aggregation filter, $<$<NOT:$<IN_LIST:lib,...>>:lib>, and
    # $<LINK_ONLY:lib> both name one library.
    if(item MATCHES "^\\$<\\$<NOT:\\$<IN_LIST:([^,>]+),")
      set(item "${CMAKE_MATCH_1}")
    elseif(item MATCHES "^\\$<LINK_ONLY:([^>]+)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item STREQUAL "" OR item MATCHES "-NOTFOUND$" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")

    if(item STREQUAL "LLVM")
      llvm_map_components_to_libnames(components ${llvm_components})
      list(APPEND pending ${components})
      continue()
    endif()

    if(TARGET ${item})
      get_target_property(type ${item} TYPE)
      get_target_property(imported ${item} IMPORTED)
      set(deps)
      if(type STREQUAL "STATIC_LIBRARY")
        list(APPEND archives "$<TARGET_FILE:${item}>")
        if(NOT imported)
          list(APPEND targets ${item})
          get_target_property(deps ${item} LINK_LIBRARIES)
        endif()
      elseif(NOT type STREQUAL "INTERFACE_LIBRARY")
        # An imported shared library: its archive instead, by path.
        get_target_property(location ${item} IMPORTED_LOCATION)
        if(NOT location)
          get_target_property(configs ${item} IMPORTED_CONFIGURATIONS)
          list(GET configs 0 config)
          get_target_property(location ${item} IMPORTED_LOCATION_${config})
        endif()
        list(APPEND pending "${location}")
      endif()
      get_target_property(interface ${item} INTERFACE_LINK_LIBRARIES)
      list(APPEND pending ${deps} ${interface})
    elseif(IS_ABSOLUTE "${item}")
      get_filename_component(file "${item}" NAME)
      if(file MATCHES "^lib(c|m|dl|rt|pthread|util|resolv)\\.so")
        # glibc's: linked as it is.
        list(APPEND system "${CMAKE_MATCH_1}")
        continue()
      endif()
      if(item MATCHES "\\.a$")
        list(APPEND archives "${item}")
        continue()
      endif()
      string(REGEX REPLACE "\\.so(\\.[0-9.]*)?$" "" stem "${item}")
      if(EXISTS "${stem}_pic.a")
        list(APPEND archives "${stem}_pic.a")
      elseif(EXISTS "${stem}.a")
        list(APPEND archives "${stem}.a")
      else()
        list(APPEND dropped "${item}")
      endif()
    elseif(item MATCHES "::")
      # A package's target that was not found here (zstd).
      list(APPEND dropped "${item}")
    else()
      string(REGEX REPLACE "^-l" "" item "${item}")
      list(APPEND system "${item}")
    endif()
  endwhile()
  list(REMOVE_DUPLICATES system)
  set(${out_archives} ${archives} PARENT_SCOPE)
  set(${out_targets} ${targets} PARENT_SCOPE)
  set(${out_system} ${system} PARENT_SCOPE)
  set(${out_dropped} ${dropped} PARENT_SCOPE)
endfunction()

# A shared library that carries everything it needs: the objects of the
# EMBED libraries, SOURCES, and every static archive they link (Lethe's,
# MLIR's, LLVM's components, third-party ones such as CBC), with the C++
# runtime linked statically, so that it needs only glibc. It exports only
# what VERSION_SCRIPT names, and -Wl,--exclude-libs,ALL keeps every
# archive's symbols local: loaded into a process that holds another LLVM
# (Triton's), neither interposes the other.
#
#   lethe_add_standalone_library(name
#     EMBED lib...            # add_mlir_public_c_api_library targets
#     SOURCES file...
#     VERSION_SCRIPT file
#     LLVM_COMPONENTS component...
#     OUTPUT_NAME name OUTPUT_DIRECTORY dir)
function(lethe_add_standalone_library name)
  cmake_parse_arguments(ARG ""
    "VERSION_SCRIPT;OUTPUT_NAME;OUTPUT_DIRECTORY"
    "EMBED;SOURCES;LLVM_COMPONENTS" ${ARGN})
  set(objects)
  set(roots)
  foreach(lib ${ARG_EMBED})
    list(APPEND objects "$<TARGET_OBJECTS:obj.${lib}>")
    # The unfiltered link libraries, which add_mlir_library records for
    # aggregation.
    get_target_property(deps ${lib} MLIR_AGGREGATE_DEP_LIBS_IMPORTED)
    list(APPEND roots ${deps})
  endforeach()
  _lethe_static_closure(archives targets system dropped
                        "${ARG_LLVM_COMPONENTS}" ${roots})
  if(dropped)
    message(STATUS "${name}: not linked (no static archive): ${dropped}")
  endif()

  add_library(${name} SHARED ${objects} ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES
    OUTPUT_NAME ${ARG_OUTPUT_NAME}
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY}
    LINKER_LANGUAGE CXX
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${ARG_VERSION_SCRIPT})
  add_dependencies(${name} ${ARG_EMBED} ${targets})
  # Archives are named by path (linking the targets would bring back their
  # interfaces, libLLVM.so among them); the group lets GNU ld resolve them
  # in any order, as lld does.
  target_link_libraries(${name} PRIVATE
    -Wl,--start-group ${archives} -Wl,--end-group ${system})
  target_link_options(${name} PRIVATE
    -static-libstdc++ -static-libgcc
    LINKER:--version-script=${ARG_VERSION_SCRIPT}
    LINKER:--exclude-libs,ALL
    LINKER:-z,defs
    LINKER:--gc-sections)
  if(LETHE_STRIP_STANDALONE)
    target_link_options(${name} PRIVATE LINKER:--strip-all)
  endif()
  if(LLVM_USE_LINKER STREQUAL "lld")
    target_link_options(${name} PRIVATE LINKER:--icf=all)
  endif()
endfunction()

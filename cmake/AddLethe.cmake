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

# tests/docs_builtins.cmake - docs/language.md's Builtins tables name every
# builtin the compiler has, and nothing else (tests/docs_builtins.sh); the
# names come from the compiler's own tables (tests/docs/list_builtins.c).
add_executable(list_builtins ${CMAKE_CURRENT_SOURCE_DIR}/docs/list_builtins.c)
target_link_libraries(list_builtins PRIVATE graphrun_internal)
add_test(NAME docs_document_every_builtin
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs_builtins.sh $<TARGET_FILE:list_builtins>
          ${PROJECT_SOURCE_DIR}/docs/language.md)

# docs/language.md's ```graph blocks compile, but those marked as fragments
# (tests/docs_graph_blocks.sh).
add_test(NAME docs_graph_blocks_compile
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs_graph_blocks.sh $<TARGET_FILE:graphrun>
          ${PROJECT_SOURCE_DIR}/docs/language.md)

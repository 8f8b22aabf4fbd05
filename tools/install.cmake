# tools/install.cmake - the CLI's documents, made by the CLI itself from the
# option tables --help prints (tools/cli_opts.c), so they never disagree:
# the man page (graphrun man) and the bash and zsh completions (graphrun
# completion bash|zsh), built with the graphrun target and installed beside
# it.  Included from the top-level CMakeLists.txt after the graphrun target:
#     include(tools/install.cmake)
include(GNUInstallDirs)

set(GR_CLI_DOC_DIR ${CMAKE_CURRENT_BINARY_DIR}/cli)
add_custom_command(TARGET graphrun POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GR_CLI_DOC_DIR}
  COMMAND sh -c "$0 man > $1/graphrun.1 && $0 completion bash > $1/graphrun.bash && $0 completion zsh > $1/_graphrun"
          $<TARGET_FILE:graphrun> ${GR_CLI_DOC_DIR}
  COMMENT "graphrun: man page and shell completions from the option tables"
  VERBATIM)

install(FILES ${GR_CLI_DOC_DIR}/graphrun.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${GR_CLI_DOC_DIR}/graphrun.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME graphrun)
install(FILES ${GR_CLI_DOC_DIR}/_graphrun DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)

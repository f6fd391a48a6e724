# Writes the --help texts of the ufp4 command into OUT: ufp4.txt is `ufp4 help` (the list of
# commands) and ufp4-CMD.txt is `ufp4 CMD --help` for each command that list names, so a new
# command gets its text without an edit here. Run by cmake/install.cmake after each link of ufp4:
#   cmake -DUFP4="[emulator;]path/to/ufp4" -DOUT=dir -P help_texts.cmake
# A command whose --help fails, or prints nothing, fails the build.
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${UFP4} help OUTPUT_VARIABLE list RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help_texts: `ufp4 help` failed (${rc})")
endif()
string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*" names "${list}")
set(count 0)
foreach(n ${names})
  string(STRIP "${n}" name)
  if(name STREQUAL "help" OR name STREQUAL "version")
    continue()
  endif()
  execute_process(COMMAND ${UFP4} ${name} --help OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "help_texts: `ufp4 ${name} --help` failed (${rc}): ${err}")
  endif()
  file(WRITE ${OUT}/ufp4-${name}.txt "${text}")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "help_texts: `ufp4 help` named no command:\n${list}")
endif()
# Last, so that its date says all the others are made.
file(WRITE ${OUT}/ufp4.txt "${list}")

# cmake -DLIB=libX.a -DLD=ld -DOBJCOPY=objcopy -DAR=ar -DNM=nm -P api_only.cmake
# Make an installed static library export its API alone: its objects are linked into one
# relocatable object (their references to each other resolved), in which every strong
# global definition but zinf_* is made local, and the archive holds that object. Weak and
# unique ones (C++ inline functions and templates the CUDA kernels' objects instantiate,
# typeinfo) stay as they are: the linker merges them with a program's own copies by name,
# and a local one would point at a copy it discarded. Run by the install (CMakeLists.txt,
# zinf_install_api_only).
foreach(_v LIB LD OBJCOPY AR NM)
  if(NOT ${_v})
    message(FATAL_ERROR "api_only.cmake: ${_v} not given")
  endif()
endforeach()
set(_obj "${LIB}.api.o")
execute_process(COMMAND "${LD}" -r -o "${_obj}" --whole-archive "${LIB}"
  RESULT_VARIABLE _rc ERROR_VARIABLE _err)
set(_list "${LIB}.local.txt")
if(NOT _rc)
  execute_process(COMMAND "${NM}" -g --defined-only "${_obj}" OUTPUT_VARIABLE _syms
    RESULT_VARIABLE _rc ERROR_VARIABLE _err)
endif()
if(NOT _rc)
  # "ADDRESS TYPE NAME" lines; the strong definitions' types: text, data, bss, read-only,
  # small data and bss
  string(REGEX MATCHALL "[^\n]+" _lines "${_syms}")
  set(_local "")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^[0-9a-fA-F]* +[TDBRGS] +(.+)$")
      set(_name "${CMAKE_MATCH_1}") # (another MATCHES resets CMAKE_MATCH_1)
      if(NOT _name MATCHES "^zinf_")
        string(APPEND _local "${_name}\n")
      endif()
    endif()
  endforeach()
  file(WRITE "${_list}" "${_local}")
  execute_process(COMMAND "${OBJCOPY}" "--localize-symbols=${_list}" "${_obj}"
    RESULT_VARIABLE _rc ERROR_VARIABLE _err)
endif()
if(NOT _rc)
  file(REMOVE "${LIB}")
  execute_process(COMMAND "${AR}" rcs "${LIB}" "${_obj}" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
endif()
file(REMOVE "${_obj}" "${_list}")
if(_rc)
  message(FATAL_ERROR "${LIB}: making its internal symbols local failed: ${_err}")
endif()

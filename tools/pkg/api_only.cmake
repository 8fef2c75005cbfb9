# cmake -DLIB=libX.a -DLD=ld -DOBJCOPY=objcopy -DAR=ar -P api_only.cmake
# Make an installed static library export its API alone: its objects are linked into one
# relocatable object (their references to each other resolved), in which every global
# symbol but zinf_* is made local, and the archive holds that object. Run by the install
# (CMakeLists.txt, zinf_install_api_only).
foreach(_v LIB LD OBJCOPY AR)
  if(NOT ${_v})
    message(FATAL_ERROR "api_only.cmake: ${_v} not given")
  endif()
endforeach()
set(_obj "${LIB}.api.o")
execute_process(COMMAND "${LD}" -r -o "${_obj}" --whole-archive "${LIB}"
  RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc)
  execute_process(COMMAND "${OBJCOPY}" --wildcard "--keep-global-symbol=zinf_*" "${_obj}"
    RESULT_VARIABLE _rc ERROR_VARIABLE _err)
endif()
if(NOT _rc)
  file(REMOVE "${LIB}")
  execute_process(COMMAND "${AR}" rcs "${LIB}" "${_obj}" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
endif()
file(REMOVE "${_obj}")
if(_rc)
  message(FATAL_ERROR "${LIB}: making its internal symbols local failed: ${_err}")
endif()

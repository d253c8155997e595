# One CMake target per package of proxy/packages.txt (an OBJECT library of
# the package's folder, or an INTERFACE library when it has headers only),
# linked to the packages it may include and to nothing above them:
# compiled against what it names, a package that reaches up fails to
# compile or to link. cmake/check_layering.py checks every include against
# the same table before anything is compiled (target onelayer_layering).
#
# onelayer_core and onelayer_shell are the static libraries the binary, the
# tests and the fuzzers link: every package of their layer, with the same
# flags as before. ONELAYER_CORE_SRC lists the core's sources (the fuzzers
# compile them again with instrumentation).

find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_custom_target(onelayer_layering
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/cmake/check_layering.py ${CMAKE_SOURCE_DIR}
  COMMENT "Checking that includes go down the layers (proxy/packages.txt)"
  VERBATIM)

file(GLOB_RECURSE ONELAYER_CORE_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/proxy/core/*.cc)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/proxy/packages.txt)

# The table, and the folders it does not name (at the top of their layer).
file(STRINGS ${CMAKE_SOURCE_DIR}/proxy/packages.txt _onelayer_lines REGEX "^[a-z]")
set(ONELAYER_PACKAGES)
foreach(_line IN LISTS _onelayer_lines)
  string(REGEX REPLACE "#.*" "" _line "${_line}")
  string(FIND "${_line}" "|" _bar)
  set(_libs "")
  if(_bar GREATER -1)
    string(SUBSTRING "${_line}" ${_bar} -1 _libs)
    string(SUBSTRING "${_line}" 0 ${_bar} _line)
    string(REPLACE "|" "" _libs "${_libs}")
    separate_arguments(_libs UNIX_COMMAND "${_libs}")
  endif()
  separate_arguments(_words UNIX_COMMAND "${_line}")
  list(POP_FRONT _words _pkg)
  list(APPEND ONELAYER_PACKAGES ${_pkg})
  set(_deps_${_pkg} ${_words})
  set(_libs_${_pkg} ${_libs})
endforeach()
foreach(_layer core shell)
  file(GLOB _entries LIST_DIRECTORIES true ${CMAKE_SOURCE_DIR}/proxy/${_layer}/*)
  foreach(_entry IN LISTS _entries)
    get_filename_component(_name ${_entry} NAME)
    if(IS_DIRECTORY ${_entry})
      if(NOT "${_layer}/${_name}" IN_LIST ONELAYER_PACKAGES)
        message(STATUS "proxy/${_layer}/${_name} is not in proxy/packages.txt: built at the top of its layer")
        list(APPEND ONELAYER_PACKAGES ${_layer}/${_name})
        set(_deps_${_layer}/${_name} "*-top")
        set(_libs_${_layer}/${_name} "")
      endif()
    elseif(_name MATCHES "\\.(cc|h)$")
      message(FATAL_ERROR "proxy/${_layer}/${_name} is in no package: move it into a folder of proxy/${_layer} "
                          "(proxy/packages.txt lists them)")
    endif()
  endforeach()
endforeach()

function(onelayer_target_name pkg out)
  string(REPLACE "/" "_" _t "onelayer_${pkg}")
  set(${out} ${_t} PARENT_SCOPE)
endfunction()

set(_onelayer_shell_libs PkgConfig::LIBUV spdlog::spdlog fmt::fmt Threads::Threads ${CMAKE_DL_LIBS})
set(ONELAYER_CORE_PACKAGE_TARGETS)
set(ONELAYER_SHELL_PACKAGE_TARGETS)
foreach(_pkg IN LISTS ONELAYER_PACKAGES)
  onelayer_target_name(${_pkg} _t)
  string(REGEX MATCH "^[a-z]+" _layer ${_pkg})
  file(GLOB _src CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/proxy/${_pkg}/*.cc)
  file(GLOB _subdirs LIST_DIRECTORIES true ${CMAKE_SOURCE_DIR}/proxy/${_pkg}/*)
  foreach(_s IN LISTS _subdirs)
    if(IS_DIRECTORY ${_s})
      file(GLOB_RECURSE _more CONFIGURE_DEPENDS ${_s}/*.cc)
      list(APPEND _src ${_more})
    endif()
  endforeach()
  if(_src)
    add_library(${_t} OBJECT ${_src})
    set(_scope PUBLIC)
    target_compile_options(${_t} PRIVATE ${ONELAYER_WARNINGS})
    add_dependencies(${_t} onelayer_layering)
  else()
    add_library(${_t} INTERFACE)
    set(_scope INTERFACE)
  endif()
  target_include_directories(${_t} ${_scope} ${CMAKE_SOURCE_DIR}/proxy)
  target_compile_definitions(${_t} ${_scope} ONELAYER_VERSION="${PROJECT_VERSION}")
  # What it may include: the packages it names ("*": all of its layer but
  # itself; "*-top": all of its layer but the top).
  set(_deps)
  foreach(_d IN LISTS _deps_${_pkg})
    if(_d STREQUAL "*" OR _d STREQUAL "*-top")
      foreach(_q IN LISTS ONELAYER_PACKAGES)
        if(NOT _q STREQUAL _pkg AND _q MATCHES "^${_layer}/")
          if(_d STREQUAL "*" OR NOT (_deps_${_q} STREQUAL "*" OR _deps_${_q} STREQUAL "*-top"))
            list(APPEND _deps ${_q})
          endif()
        endif()
      endforeach()
    else()
      list(APPEND _deps ${_d})
    endif()
  endforeach()
  foreach(_d IN LISTS _deps)
    onelayer_target_name(${_d} _dt)
    target_link_libraries(${_t} ${_scope} ${_dt})
  endforeach()
  foreach(_l IN LISTS _libs_${_pkg})
    if(_l STREQUAL "yaml-cpp")
      target_link_libraries(${_t} ${_scope} yaml-cpp)
    elseif(_l STREQUAL "llhttp")
      target_link_libraries(${_t} ${_scope} llhttp)
    elseif(_l STREQUAL "nghttp2")
      target_link_libraries(${_t} ${_scope} onelayer_nghttp2)
    elseif(_l STREQUAL "hiredis")
      target_link_libraries(${_t} ${_scope} PkgConfig::HIREDIS)
    else()
      message(FATAL_ERROR "proxy/packages.txt: ${_pkg} links '${_l}', which cmake/packages.cmake does not know")
    endif()
  endforeach()
  if(_layer STREQUAL "shell")
    target_link_libraries(${_t} ${_scope} onelayer_core ${_onelayer_shell_libs})
    target_include_directories(${_t} SYSTEM ${_scope} ${OPENSSL_INCLUDE_DIR})
    list(APPEND ONELAYER_SHELL_PACKAGE_TARGETS ${_t})
  else()
    list(APPEND ONELAYER_CORE_PACKAGE_TARGETS ${_t})
  endif()
endforeach()

# An include listed in proxy/layering_exceptions.txt goes up a layer today:
# its file's package is compiled with the usage requirements (include
# directories, definitions) of the package it reaches, without linking to it.
file(STRINGS ${CMAKE_SOURCE_DIR}/proxy/layering_exceptions.txt _onelayer_up REGEX "^[a-z]+/[a-z0-9_]+/.* -> [a-z]+/[a-z0-9_]+/")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/proxy/layering_exceptions.txt)
foreach(_line IN LISTS _onelayer_up)
  string(REGEX MATCH "^([a-z]+/[a-z0-9_]+)/.* -> ([a-z]+/[a-z0-9_]+)/" _m "${_line}")
  set(_from ${CMAKE_MATCH_1})
  set(_to ${CMAKE_MATCH_2})
  if(_from IN_LIST ONELAYER_PACKAGES AND _to IN_LIST ONELAYER_PACKAGES)
    onelayer_target_name(${_from} _ft)
    onelayer_target_name(${_to} _tt)
    get_target_property(_type ${_ft} TYPE)
    if(NOT _type STREQUAL "INTERFACE_LIBRARY")
      target_include_directories(${_ft} PRIVATE $<TARGET_PROPERTY:${_tt},INTERFACE_INCLUDE_DIRECTORIES>)
      target_compile_definitions(${_ft} PRIVATE $<TARGET_PROPERTY:${_tt},INTERFACE_COMPILE_DEFINITIONS>)
    endif()
  endif()
endforeach()

# Pure core: config model and loader, header rules, routing, retry decisions,
# budgets, breakers, balancing, HPACK, metrics. Standard library and yaml-cpp
# only: no libuv, llhttp, nghttp2 or spdlog (the layering check enforces it).
add_library(onelayer_core STATIC)
target_link_libraries(onelayer_core PUBLIC ${ONELAYER_CORE_PACKAGE_TARGETS})

# I/O shell: event loop, connections, codecs, upstream pools, health, admin.
add_library(onelayer_shell STATIC)
target_link_libraries(onelayer_shell PUBLIC ${ONELAYER_SHELL_PACKAGE_TARGETS} onelayer_core llhttp onelayer_nghttp2 PkgConfig::HIREDIS
                      ${_onelayer_shell_libs})
target_include_directories(onelayer_shell SYSTEM PUBLIC ${OPENSSL_INCLUDE_DIR})

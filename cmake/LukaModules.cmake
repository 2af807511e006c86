# Each module's include folder, so the build enforces the layering (docs/architecture.md, "Layers").
#
# Sources include each other by their path from the checkout ("core/luka/config.h"). A library does
# not export the checkout for that: it exports a folder of its own, build/include/<target>, that
# holds one link to the module folder it is made of (build/include/luka_luka/core/luka ->
# core/luka). A file therefore finds another module's headers only through a library it links,
# and only through the modules linked below it: a header of a module it does not link, or of a
# module above it, is "No such file" at compile time. scripts/check_layers.py adds the finer rules
# (no LibTorch in captures and viz, no GUI below app) and runs at build time too (luka_layering).

# luka_module(TARGET DIR): TARGET's public include folder is DIR (a folder of the checkout, e.g.
# core/luka), under the include path "DIR/...". A header-only module is an INTERFACE library.
function(luka_module target dir)
  set(root "${CMAKE_BINARY_DIR}/include/${target}")
  get_filename_component(parent "${root}/${dir}" DIRECTORY)
  # A folder above the link that an older layout made a link itself (a module that moved down a
  # level, as app/studio into app/studio/data) is removed first, so the link lands in the build.
  set(above "${root}")
  string(REPLACE "/" ";" parts "${dir}")
  foreach(part IN LISTS parts)
    if(IS_SYMLINK "${above}")
      file(REMOVE "${above}")
      break()
    endif()
    set(above "${above}/${part}")
  endforeach()
  file(MAKE_DIRECTORY "${parent}")
  # Made again at every configure, so a build folder reused for a moved checkout points at it.
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${dir}" "${root}/${dir}" SYMBOLIC)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE "${root}")
  elseif(type STREQUAL "EXECUTABLE")
    target_include_directories(${target} PRIVATE "${root}")
  else()
    target_include_directories(${target} PUBLIC "${root}")
  endif()
endfunction()

# luka_layering_check(): scripts/check_layers.py over every source file, at build time (the target
# luka_layering, part of `all`): a wrong-way include fails the build, not only the test.
function(luka_layering_check)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(globs)
  foreach(m app captures viz core kernels tests)
    foreach(ext h hpp cpp cc cu cuh inl)
      list(APPEND globs "${PROJECT_SOURCE_DIR}/${m}/*.${ext}")
    endforeach()
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${globs})
  set(stamp "${CMAKE_BINARY_DIR}/layering.stamp")
  add_custom_command(OUTPUT "${stamp}"
    COMMAND Python3::Interpreter "${PROJECT_SOURCE_DIR}/scripts/check_layers.py" "${PROJECT_SOURCE_DIR}"
    COMMAND "${CMAKE_COMMAND}" -E touch "${stamp}"
    DEPENDS "${PROJECT_SOURCE_DIR}/scripts/check_layers.py" ${sources}
    COMMENT "Checking the layering of every #include (scripts/check_layers.py)"
    VERBATIM)
  add_custom_target(luka_layering ALL DEPENDS "${stamp}")
endfunction()

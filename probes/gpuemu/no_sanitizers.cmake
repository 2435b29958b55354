# SPDX-License-Identifier: MIT
# include()d by the CMakeLists.txt of probes/gpuemu and tests/gpuemu: takes
# the options of AUTOBATCH_SANITIZE off the folder that includes it (those
# files say why).  Directory properties, so the rest of the tree keeps them.
foreach(prop COMPILE_OPTIONS LINK_OPTIONS)
  get_directory_property(ab_opts ${prop})
  list(REMOVE_ITEM ab_opts -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  set_directory_properties(PROPERTIES ${prop} "${ab_opts}")
endforeach()

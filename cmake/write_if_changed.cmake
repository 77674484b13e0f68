# write_if_changed(PATH CONTENT): writes CONTENT to PATH only when it differs from what PATH
# holds, so that targets depending on a generated source are not rebuilt needlessly. Shared by the
# script-mode generators (storage/embed_migrations.cmake, northbound/embed_web.cmake).
function(write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()

# Writes the bytes of INPUT as a NUL-terminated C array named NAME into OUTPUT (cmake -P; used for code/tools_shim.py).
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "/* generated from ${INPUT_NAME} by code/embed_text.cmake: do not edit */\nstatic const char ${NAME}[] = {\n    ${bytes}0x00};\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")

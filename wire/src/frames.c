/* wire/src/frames.c: a growable list of owned byte frames. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/frames.h"

void wire_frames_init(wire_frames_t *frames)
{
    memset(frames, 0, sizeof(*frames));
}

void wire_frames_push_owned(wire_frames_t *frames, void *base, size_t len)
{
    if (frames->size == frames->capacity) {
        frames->capacity = frames->capacity != 0 ? frames->capacity * 2 : 8;
        frames->entries = wire_realloc(frames->entries, frames->capacity * sizeof(frames->entries[0]));
    }
    frames->entries[frames->size++] = (wire_frame_t){base, len};
}

void wire_frames_push_copy(wire_frames_t *frames, const void *base, size_t len)
{
    /* Every owned frame has a real allocation, even an empty one, so `base` is never NULL. */
    void *copy = wire_malloc(len);
    if (len != 0)
        memcpy(copy, base, len);
    wire_frames_push_owned(frames, copy, len);
}

void wire_frames_dispose(wire_frames_t *frames)
{
    for (size_t i = 0; i != frames->size; ++i)
        free(frames->entries[i].base);
    free(frames->entries);
    wire_frames_init(frames);
}

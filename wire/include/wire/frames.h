/* wire/frames.h: a growable list of owned byte frames (one ZMQ multipart message). */
#ifndef WIRE_FRAMES_H
#define WIRE_FRAMES_H

#include <stddef.h>

/** One frame: a view of `len` bytes at `base`. Ownership depends on where it lives. */
typedef struct st_wire_frame_t {
    void *base;
    size_t len;
} wire_frame_t;

/** A list of frames that owns every `base` (each allocated with wire_malloc). */
typedef struct st_wire_frames_t {
    wire_frame_t *entries;
    size_t size;
    size_t capacity;
} wire_frames_t;

/** Initialises an empty list (equivalent to zero-filling it). */
void wire_frames_init(wire_frames_t *frames);
/** Appends a copy of `len` bytes at `base`. */
void wire_frames_push_copy(wire_frames_t *frames, const void *base, size_t len);
/** Appends `base` (allocated with wire_malloc); the list takes ownership. */
void wire_frames_push_owned(wire_frames_t *frames, void *base, size_t len);
/** Frees every frame and the list storage; leaves an empty list. */
void wire_frames_dispose(wire_frames_t *frames);

#endif

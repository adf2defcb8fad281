#ifndef CALLGRIND_CONTROL_H
#define CALLGRIND_CONTROL_H

// Marks the part of a run that valgrind's callgrind counts (start it with --collect-atstart=no),
// so that instructions per operation are read without the setup around them. Outside valgrind,
// or where valgrind's headers are missing, this does nothing.

/// Starts counting when stopped, stops when counting, on the calling thread.
void callgrind_toggle_collect(void);

#endif

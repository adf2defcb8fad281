#include "CallgrindControl.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>

void callgrind_toggle_collect(void) { CALLGRIND_TOGGLE_COLLECT; }
#else
void callgrind_toggle_collect(void) {}
#endif

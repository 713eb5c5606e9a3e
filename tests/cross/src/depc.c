/* libdepc.so, for --clear-symbol-version: dep_marker in two versions. A program bound to
   dep_marker@DEP_1.0 prints DEP1; with that version cleared it binds to the default one,
   dep_marker@@DEP_2.0, and prints DEPC. */
#include <string.h>
const char *dep_marker_v1(void) { return "DEP1"; }
const char *dep_marker_v2(void) { return "DEPC"; }
__asm__(".symver dep_marker_v1, dep_marker@DEP_1.0");
__asm__(".symver dep_marker_v2, dep_marker@@DEP_2.0");
const char *dep_alt(void) { return "DEPR"; }
unsigned long dep_len(const char *s) { return 1000 + strlen(s); }

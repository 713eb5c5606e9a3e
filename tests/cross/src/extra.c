/* libextra.so: not needed by the program; --add-needed libextra.so must
   make the loader run this constructor. */
#include <stdio.h>
__attribute__((constructor)) static void extra_ctor(void) {
    printf("STUBSTRIP-EXTRA-CTOR\n");
    fflush(stdout);
}

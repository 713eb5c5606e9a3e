/* libprior.so: what tests/cross/prior.py has an earlier editor add with
   --add-needed before elfpatch edits the file; its constructor shows that
   the added entry works. */
#include <stdio.h>
__attribute__((constructor)) static void prior_ctor(void) {
    printf("STUBSTRIP-PRIOR-CTOR\n");
    fflush(stdout);
}

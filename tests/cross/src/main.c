/* The test program: calls into libdep and prints every object the loader
   mapped, with the name it was found under (for the interpreter that is
   the PT_INTERP string), so the harness can tell which copy was used. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>

extern const char *dep_marker(void);
extern unsigned long dep_len(const char *);

static int print_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name && info->dlpi_name[0])
        printf("STUBSTRIP-OBJ %s\n", info->dlpi_name);
    return 0;
}

int main(void) {
    printf("STUBSTRIP-RAN dep=%s\n", dep_marker());
    /* 1004 from libdep; 4 once the symbol is renamed to libc's strlen. */
    printf("STUBSTRIP-LEN %lu\n", dep_len("abcd"));
    dl_iterate_phdr(print_object, 0);
    return 0;
}

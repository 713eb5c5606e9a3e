/* D: a program linking B's libprobe.so (and nothing of CUDA itself). Prints what cuInit answered. */
#include <stdio.h>

int probe_init(void);

int main(void) {
  printf("cuInit returned %d\n", probe_init());
  return 0;
}

/* Calls into libcuda.so.1 and reports what came back; the stub answers 34. */
#include <stdio.h>

int cuInit(unsigned int flags);

int main(void) {
  printf("cuInit returned %d\n", cuInit(0));
  return 0;
}

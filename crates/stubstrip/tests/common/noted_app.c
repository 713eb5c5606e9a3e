/* As a libcudart_static program: the name libcuda.so.1 in .rodata, dlopen()ed, no DT_NEEDED;
   and a .note.dlopen as systemd's SD_ELF_NOTE_DLOPEN lays it out, declaring libplug.so.3 or
   libplug.so.2. Built by tests/it/note_dlopen_real.rs and by the unit tests of src/audit/run.rs. */
#include <dlfcn.h>
#include <stdint.h>
#define JSON "[{\"feature\":\"plug\",\"description\":\"d\",\"priority\":\"suggested\",\"soname\":[\"libplug.so.3\",\"libplug.so.2\"]}]"
__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct {
    struct { uint32_t n_namesz, n_descsz, n_type; } nhdr;
    char name[4];
    _Alignas(4) char json[sizeof(JSON)];
} note = { { 4, sizeof(JSON), 0x407c0c0a }, "FDO", JSON };
static const char cuda[] = "libcuda.so.1";
int main(void) { return dlopen(cuda, RTLD_NOW) ? 0 : 1; }

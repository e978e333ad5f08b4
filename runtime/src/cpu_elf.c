/* cpu_elf.c — header checks of CPU code sections (cpu_elf.h). */
#include "cpu_elf.h"

#include <elf.h>
#include <string.h>

#include "errors.h"

#if defined(__x86_64__)
#define HOST_ARCH "x86_64"
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_ARCH "aarch64"
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_ARCH NULL
#define HOST_MACHINE EM_NONE
#endif

const char* tsr_cpu_host_arch(void) { return HOST_ARCH; }

static uint16_t rd16(const uint8_t* p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint64_t rd64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

tsr_status_t tsr_cpu_check_shared_object(const uint8_t* b, size_t size, const char* section) {
  if (!HOST_ARCH) return tsr_fail(TSR_ERROR_UNSUPPORTED, "the CPU backend does not support this host architecture");
  if (size < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64 ||
      b[EI_DATA] != ELFDATA2LSB)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' is not an ELF64 little-endian object", section);
  if (rd16(b + 16) != ET_DYN)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' is not a shared object (e_type %u)", section,
                    rd16(b + 16));
  if (rd16(b + 18) != HOST_MACHINE)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' holds code for e_machine %u, not this %s host",
                    section, rd16(b + 18), HOST_ARCH);
  uint64_t phoff = rd64(b + 32), phnum = rd16(b + 56), phentsize = rd16(b + 54);
  if (phentsize != sizeof(Elf64_Phdr) || phnum == 0 || phoff > size || phnum * phentsize > size - phoff)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' has a malformed program header table", section);
  /* The dynamic loader maps each segment's file bytes from the object: bytes past its end would fault (SIGBUS)
   * the first time they are touched, inside dlopen. A section cut short (a damaged size in the image's section
   * header) must be refused here. */
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* ph = b + phoff + i * phentsize;
    uint32_t type = (uint32_t)(ph[0] | ph[1] << 8 | ph[2] << 16 | (uint32_t)ph[3] << 24);
    uint64_t offset = rd64(ph + 8), filesz = rd64(ph + 32), memsz = rd64(ph + 40);
    if (type == PT_LOAD && (offset > size || filesz > size - offset || filesz > memsz))
      return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' (%zu bytes) is shorter than its segment %llu "
                      "([%llu, +%llu) of the file)", section, size, (unsigned long long)i, (unsigned long long)offset,
                      (unsigned long long)filesz);
  }
  return TSR_SUCCESS;
}

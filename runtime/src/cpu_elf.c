/* cpu_elf.c — checks of CPU code sections (cpu_elf.h): everything of the shared object that the system's
 * dynamic loader reads and trusts while dlopen() maps and links it.
 *
 * glibc's loader follows the object's own pointers without bounds: the dynamic section at PT_DYNAMIC's
 * address, the tables the dynamic section names, hash chains to their end bit, version chains to a zero
 * link, each relocation's target. A damaged value among them faults inside dlopen (SIGSEGV), divides by zero
 * (an empty hash table), trips one of the loader's assertions (which ends the process), writes through a
 * wild pointer, or calls one. So every value the loader would follow is checked here to land inside the
 * object's own image, in a segment of the right kind:
 *
 *  - the ELF header and program header table: loadable segments readable, inside the file, in address and
 *    file order without overlap, aligned as the loader requires, within MAX_SPAN, zero-filled only where
 *    writable; every other segment that the loader or an unwinder reads (dynamic, notes, properties, RELRO,
 *    TLS, the header table itself) inside one;
 *  - the dynamic section: terminated, only the tags a shared object of ours may have, with the entry sizes
 *    the loader asserts on. No initializers or finalizers: no check could tell a damaged one from a
 *    function, so code of ours runs only when the runtime calls an entry;
 *  - the string, symbol, hash (GNU and SysV: their structure and every chain), version and relocation
 *    tables: inside the file-backed part of a segment; strings terminated; symbols defined inside the image,
 *    functions in executable segments, no indirect functions (the loader would call them); version indices
 *    within the versions defined or needed; needed versions naming needed libraries;
 *  - relocations: known types, symbols of the table, targets inside writable segments and outside the
 *    loader's own tables.
 *
 * The code itself stays trusted (docs/robustness.md): its instructions, the entry addresses the symbols
 * give, and the data it reads as pointers are not checked. */
#include "cpu_elf.h"

#include <elf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

enum {
  MAX_PHNUM = 64,          /* the loader copies the table to its stack */
  MAX_LOADS = 16,
  MAX_NEEDED = 32,
  MAX_CHAIN = 1 << 12,     /* version entries and their auxiliaries followed */
  MAX_PROTECTED = 16,
};
#define MAX_SPAN ((uint64_t)1 << 32) /* address range of the loadable segments */
#define PAGE 4096u
#ifndef DT_RELR /* glibc before 2.36 */
#define DT_RELRSZ 35
#define DT_RELR 36
#define DT_RELRENT 37
#endif

typedef struct segment {
  uint64_t vaddr, memsz, offset, filesz, align;
  uint32_t flags;
} segment_t;

typedef struct range {
  uint64_t vaddr, size;
} range_t;

typedef struct elf {
  const uint8_t* b;
  size_t size;
  const char* section;
  segment_t loads[MAX_LOADS];
  int nloads;
  bool has_tls;
  /* the dynamic section's values (0: absent) */
  uint64_t strtab, strsz, symtab, gnu_hash, hash, rela, relasz, jmprel, pltrelsz, relr, relrsz, versym, verneed,
      verdef, pltgot;
  uint64_t needed[MAX_NEEDED];
  int nneeded;
  uint64_t nsyms, ndx_high;
  range_t protected[MAX_PROTECTED]; /* the loader's tables, which no relocation may overwrite */
  int nprotected;
} elf_t;

static uint16_t rd16(const uint8_t* p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t* p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t* p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static tsr_status_t bad(const elf_t* e, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static tsr_status_t bad(const elf_t* e, const char* fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: the shared object in section '%s' %s", e->section, what);
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* The loadable segment holding [vaddr, vaddr + len) in its memory (file: in its file-backed part). */
static const segment_t* segment_of(const elf_t* e, uint64_t vaddr, uint64_t len, bool file) {
  for (int i = 0; i < e->nloads; i++) {
    const segment_t* s = &e->loads[i];
    uint64_t extent = file ? s->filesz : s->memsz;
    if (vaddr >= s->vaddr && vaddr - s->vaddr <= extent && len <= extent - (vaddr - s->vaddr)) return s;
  }
  return NULL;
}

/* The file bytes of [vaddr, vaddr + len), NULL unless they are one segment's file-backed bytes. */
static const uint8_t* at(const elf_t* e, uint64_t vaddr, uint64_t len) {
  const segment_t* s = segment_of(e, vaddr, len, true);
  return s ? e->b + s->offset + (vaddr - s->vaddr) : NULL;
}

static bool in_exec(const elf_t* e, uint64_t vaddr) {
  const segment_t* s = segment_of(e, vaddr, 1, false);
  return s && (s->flags & PF_X);
}

static void protect(elf_t* e, uint64_t vaddr, uint64_t size) {
  if (size && e->nprotected < MAX_PROTECTED) e->protected[e->nprotected++] = (range_t){vaddr, size};
}

/* A string of the string table at `offset`, NULL when out of range (the table ends with a NUL, checked). */
static const char* str(const elf_t* e, uint64_t offset) {
  return offset < e->strsz ? (const char*)at(e, e->strtab, e->strsz) + offset : NULL;
}

/* ---- program headers ----------------------------------------------------------------------------------- */

/* Notes (PT_NOTE, PT_GNU_PROPERTY): the loader walks them by their own sizes. */
static tsr_status_t check_notes(const elf_t* e, const uint8_t* p, uint64_t size, uint64_t align) {
  uint64_t a = align == 8 ? 8 : 4, pos = 0;
  while (size - pos >= 12) {
    uint64_t namesz = rd32(p + pos), descsz = rd32(p + pos + 4);
    uint64_t name_end = 12 + ((namesz + a - 1) & ~(a - 1)), end = name_end + ((descsz + a - 1) & ~(a - 1));
    if (end > size - pos) return bad(e, "has a note running past its segment");
    pos += end;
  }
  return TSR_SUCCESS;
}

static tsr_status_t check_program_headers(elf_t* e, uint64_t phoff, uint64_t phnum) {
  const uint8_t* table = e->b + phoff;
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* ph = table + i * sizeof(Elf64_Phdr);
    uint32_t type = rd32(ph);
    segment_t s = {rd64(ph + 16), rd64(ph + 40), rd64(ph + 8), rd64(ph + 32), rd64(ph + 48), rd32(ph + 4)};
    if (type != PT_LOAD) continue;
    /* The loader maps each segment's file bytes: bytes past the object's end would fault (SIGBUS) the first
     * time they are touched, inside dlopen — a section cut short must be refused here. */
    if (s.offset > e->size || s.filesz > e->size - s.offset || s.filesz > s.memsz)
      return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' (%zu bytes) is shorter than its segment %llu "
                      "([%llu, +%llu) of the file)", e->section, e->size, (unsigned long long)i,
                      (unsigned long long)s.offset, (unsigned long long)s.filesz);
    if (e->nloads == MAX_LOADS) return bad(e, "has more than %d loadable segments", MAX_LOADS);
    /* the loader reads its tables, and the program header table, through the mapping */
    if (!(s.flags & PF_R) || s.flags & ~(uint32_t)(PF_R | PF_W | PF_X))
      return bad(e, "has a loadable segment %llu that is not readable (flags 0x%x)", (unsigned long long)i, s.flags);
    /* the loader zero-fills memory past the file bytes: only data (.bss) may be made so, never code */
    if (s.memsz != s.filesz && !(s.flags & PF_W))
      return bad(e, "has a read-only segment %llu larger in memory than in the file", (unsigned long long)i);
    if (!is_pow2(s.align) || s.align < PAGE || (s.vaddr - s.offset) % s.align)
      return bad(e, "has a loadable segment %llu misaligned (align %llu)", (unsigned long long)i,
                 (unsigned long long)s.align);
    if (s.vaddr > MAX_SPAN || s.memsz > MAX_SPAN - s.vaddr)
      return bad(e, "has a loadable segment %llu past %llu bytes", (unsigned long long)i,
                 (unsigned long long)MAX_SPAN);
    const segment_t* prev = e->nloads ? &e->loads[e->nloads - 1] : NULL;
    /* in address and file order, apart in both: a segment mapping another's bytes would map data as code */
    if (prev && (s.vaddr < prev->vaddr + prev->memsz || s.offset < prev->offset + prev->filesz))
      return bad(e, "has loadable segments out of order or overlapping (segment %llu)", (unsigned long long)i);
    e->loads[e->nloads++] = s;
  }
  if (!e->nloads) return bad(e, "has no loadable segment");

  int dynamics = 0;
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* ph = table + i * sizeof(Elf64_Phdr);
    uint32_t type = rd32(ph);
    uint64_t vaddr = rd64(ph + 16), filesz = rd64(ph + 32), memsz = rd64(ph + 40), align = rd64(ph + 48);
    const uint8_t* bytes;
    switch (type) {
      case PT_LOAD:
      case PT_NULL:
      case PT_GNU_STACK:
        break;
      case PT_DYNAMIC:
        dynamics++;
        if (!(bytes = at(e, vaddr, filesz)) || filesz < sizeof(Elf64_Dyn) || memsz < filesz)
          return bad(e, "has its dynamic section outside its loadable segments");
        break;
      case PT_PHDR:
        if (memsz != phnum * sizeof(Elf64_Phdr) || !(bytes = at(e, vaddr, memsz)) || bytes != e->b + phoff)
          return bad(e, "has a PT_PHDR segment that is not its program header table");
        break;
      case PT_NOTE:
      case PT_GNU_PROPERTY:
        if (!(bytes = at(e, vaddr, filesz)) || memsz != filesz)
          return bad(e, "has a note segment outside its loadable segments");
        tsr_status_t st = check_notes(e, bytes, filesz, align);
        if (st) return st;
        break;
      case PT_TLS:
        e->has_tls = true;
        if (filesz > memsz || memsz > MAX_SPAN || (filesz && !at(e, vaddr, filesz)) || (align && !is_pow2(align)))
          return bad(e, "has a malformed TLS segment");
        break;
      case PT_GNU_RELRO: {
        const segment_t* s = segment_of(e, vaddr, memsz, false);
        if (!s || !(s->flags & PF_W)) return bad(e, "has a RELRO range outside its writable segments");
        break;
      }
      default: /* PT_GNU_EH_FRAME, PT_INTERP, others: read by unwinders, or by nobody; at least in the image */
        if (memsz && !segment_of(e, vaddr, memsz, false))
          return bad(e, "has segment %llu (type 0x%x) outside its loadable segments", (unsigned long long)i, type);
        break;
    }
  }
  return dynamics == 1 ? TSR_SUCCESS : bad(e, "has %d dynamic sections", dynamics);
}

/* ---- the dynamic section ------------------------------------------------------------------------------ */

static tsr_status_t read_dynamic(elf_t* e, uint64_t vaddr, uint64_t size) {
  const uint8_t* d = at(e, vaddr, size);
  uint64_t relaent = 0, syment = 0, pltrel = 0, relrent = 0, flags = 0;
  uint64_t present = 0; /* the standard tags (< 64) seen */
  bool terminated = false;
  for (uint64_t i = 0; i + sizeof(Elf64_Dyn) <= size && !terminated; i += sizeof(Elf64_Dyn)) {
    int64_t tag = (int64_t)rd64(d + i);
    uint64_t v = rd64(d + i + 8);
    if (tag >= 0 && tag < 64) present |= (uint64_t)1 << tag;
    switch (tag) {
      case DT_NULL: terminated = true; break;
      case DT_NEEDED:
        if (e->nneeded == MAX_NEEDED) return bad(e, "needs more than %d libraries", MAX_NEEDED);
        e->needed[e->nneeded++] = v;
        break;
      case DT_STRTAB: e->strtab = v; break;
      case DT_STRSZ: e->strsz = v; break;
      case DT_SYMTAB: e->symtab = v; break;
      case DT_SYMENT: syment = v; break;
      case DT_HASH: e->hash = v; break;
      case DT_GNU_HASH: e->gnu_hash = v; break;
      case DT_RELA: e->rela = v; break;
      case DT_RELASZ: e->relasz = v; break;
      case DT_RELAENT: relaent = v; break;
      case DT_JMPREL: e->jmprel = v; break;
      case DT_PLTRELSZ: e->pltrelsz = v; break;
      case DT_PLTREL: pltrel = v; break;
      case DT_RELR: e->relr = v; break;
      case DT_RELRSZ: e->relrsz = v; break;
      case DT_RELRENT: relrent = v; break;
      case DT_VERSYM: e->versym = v; break;
      case DT_VERNEED: e->verneed = v; break;
      case DT_VERDEF: e->verdef = v; break;
      case DT_PLTGOT: e->pltgot = v; break;
      case DT_FLAGS: flags = v; break;
      case DT_SONAME:
      case DT_RPATH:
      case DT_RUNPATH:
        if (v >= UINT32_MAX) return bad(e, "has a library name or path out of its string table");
        if (e->nneeded == MAX_NEEDED) return bad(e, "names more than %d libraries and paths", MAX_NEEDED);
        e->needed[e->nneeded++] = v | (uint64_t)1 << 63; /* checked as strings; not a needed library */
        break;
      case DT_SYMBOLIC:
      case DT_DEBUG:
      case DT_BIND_NOW:
      case DT_FLAGS_1:
      case DT_VERNEEDNUM:
      case DT_VERDEFNUM:
      case DT_RELACOUNT:
        break;
      default:
        /* Initializers and finalizers (DT_INIT, DT_FINI, their arrays): the loader would call them, and no
         * check can tell a damaged one from a function (or a kernel, called with the loader's arguments) —
         * code of ours runs only when the runtime calls an entry. DT_TEXTREL (the loader would make code
         * writable), DT_REL* (not this architecture's), filters and auxiliaries (more objects, by name), and
         * whatever else no linker writes into code of ours. */
        return bad(e, "has dynamic tag 0x%llx, which a CPU code section may not have", (unsigned long long)tag);
    }
  }
  if (!terminated) return bad(e, "has a dynamic section without its DT_NULL end");
  /* the loader asserts each of these, or reads the missing entry through a NULL pointer */
  /* The loader asserts each entry size, and reads a table's size and entry size through NULL when the
   * table comes without them: each of these groups is all there or all absent. */
#define HAS(tag) (present >> (tag) & 1)
  bool complete = HAS(DT_RELA) == HAS(DT_RELASZ) && HAS(DT_RELA) == HAS(DT_RELAENT) &&
                  HAS(DT_JMPREL) == HAS(DT_PLTREL) && HAS(DT_JMPREL) == HAS(DT_PLTRELSZ) &&
                  HAS(DT_RELR) == HAS(DT_RELRSZ) && HAS(DT_RELR) == HAS(DT_RELRENT) && HAS(DT_STRTAB) &&
                  HAS(DT_STRSZ) && HAS(DT_SYMTAB);
#undef HAS
  if (!complete || (present >> DT_SYMENT & 1 && syment != sizeof(Elf64_Sym)) ||
      (present >> DT_PLTREL & 1 && pltrel != DT_RELA) || (present >> DT_RELAENT & 1 && relaent != sizeof(Elf64_Rela)) ||
      (present >> DT_RELRENT & 1 && relrent != sizeof(uint64_t)))
    return bad(e, "has a dynamic section with missing or wrong table sizes");
  if (flags & DF_TEXTREL) return bad(e, "has text relocations");
  if (!e->strtab || !e->symtab || !e->strsz || !(e->gnu_hash || e->hash))
    return bad(e, "lacks a string, symbol or hash table");
  /* the loader reads the tables as arrays of their entries */
  if (e->symtab % 8 || e->gnu_hash % 8 || e->hash % 4 || e->rela % 8 || e->jmprel % 8 || e->relr % 8 ||
      e->versym % 2 || e->verneed % 4 || e->verdef % 4 || e->pltgot % 8)
    return bad(e, "has a misaligned table");
  return TSR_SUCCESS;
}

/* ---- tables ------------------------------------------------------------------------------------------- */

static tsr_status_t check_gnu_hash(elf_t* e) {
  const uint8_t* h = at(e, e->gnu_hash, 16);
  if (!h) return bad(e, "has its GNU hash table outside its image");
  uint64_t nbuckets = rd32(h), symoffset = rd32(h + 4), bloom = rd32(h + 8), shift = rd32(h + 12);
  /* the loader divides by nbuckets, masks with bloom - 1 (asserting a power of two) */
  if (!nbuckets || !is_pow2(bloom) || shift >= 64) return bad(e, "has a malformed GNU hash table header");
  uint64_t head = 16 + 8 * bloom + 4 * nbuckets, chains = e->gnu_hash + head;
  const uint8_t* table = at(e, e->gnu_hash, head);
  if (!table) return bad(e, "has its GNU hash table outside its image");
  e->nsyms = symoffset;
  for (uint64_t b = 0; b < nbuckets; b++) {
    uint64_t i = rd32(table + 16 + 8 * bloom + 4 * b);
    if (!i) continue;
    /* buckets start after the chains of the buckets before them (so that checking them all is linear) */
    if (i < e->nsyms) return bad(e, "has a GNU hash bucket before the hashed symbols or inside another chain");
    for (;; i++) { /* a chain runs to an entry with its low bit set */
      const uint8_t* c = at(e, chains + 4 * (i - symoffset), 4);
      if (!c) return bad(e, "has a GNU hash chain without its end");
      if (rd32(c) & 1) break;
    }
    if (i + 1 > e->nsyms) e->nsyms = i + 1;
  }
  protect(e, e->gnu_hash, head + 4 * (e->nsyms - symoffset));
  return TSR_SUCCESS;
}

static tsr_status_t check_sysv_hash(elf_t* e) {
  const uint8_t* h = at(e, e->hash, 8);
  uint64_t nbucket = h ? rd32(h) : 0, nchain = h ? rd32(h + 4) : 0;
  const uint8_t* table = h ? at(e, e->hash, 8 + 4 * (nbucket + nchain)) : NULL;
  if (!table || !nbucket) return bad(e, "has a malformed SysV hash table");
  /* every chain ends, and no two buckets share a link (so that checking them all is linear) */
  uint8_t* seen = calloc(nchain / 8 + 1, 1);
  if (!seen) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory checking CPU code");
  const uint8_t* chain = table + 8 + 4 * nbucket;
  for (uint64_t b = 0; b < nbucket; b++)
    for (uint64_t i = rd32(table + 8 + 4 * b); i; i = rd32(chain + 4 * i)) {
      if (i >= nchain || seen[i / 8] & 1 << i % 8) {
        free(seen);
        return bad(e, "has a SysV hash chain out of range or looping");
      }
      seen[i / 8] |= (uint8_t)(1 << i % 8);
    }
  free(seen);
  if (nchain > e->nsyms) e->nsyms = nchain;
  protect(e, e->hash, 8 + 4 * (nbucket + nchain));
  return TSR_SUCCESS;
}

static tsr_status_t check_symbols(elf_t* e) {
  const uint8_t* syms = at(e, e->symtab, e->nsyms * sizeof(Elf64_Sym));
  if (e->nsyms > MAX_SPAN / sizeof(Elf64_Sym) || !syms) return bad(e, "has its symbol table outside its image");
  for (uint64_t i = 1; i < e->nsyms; i++) {
    const uint8_t* s = syms + i * sizeof(Elf64_Sym);
    uint32_t name = rd32(s);
    uint8_t type = ELF64_ST_TYPE(s[4]);
    uint16_t shndx = rd16(s + 6);
    uint64_t value = rd64(s + 8);
    if (!str(e, name)) return bad(e, "has symbol %llu named out of its string table", (unsigned long long)i);
    /* the loader calls an indirect function's resolver when it is looked up: a kernel would be called so */
    if (type == STT_GNU_IFUNC) return bad(e, "has an indirect function (symbol %llu)", (unsigned long long)i);
    if (shndx == SHN_UNDEF || type == STT_TLS) continue;
    bool code = type == STT_FUNC;
    if (shndx == SHN_ABS ? code : code ? !in_exec(e, value) : !segment_of(e, value, 0, false))
      return bad(e, "defines symbol '%s' outside its %s", str(e, name), code ? "code" : "image");
  }
  protect(e, e->symtab, e->nsyms * sizeof(Elf64_Sym));
  return TSR_SUCCESS;
}

static bool is_needed(const elf_t* e, const char* name) {
  for (int i = 0; i < e->nneeded; i++)
    if (!(e->needed[i] >> 63) && strcmp(str(e, e->needed[i]), name) == 0) return true;
  return false;
}

static tsr_status_t check_versions(elf_t* e) {
  uint64_t vaddr = e->verneed, end = vaddr;
  for (int n = 0; vaddr && n < MAX_CHAIN; n++) {
    const uint8_t* v = at(e, vaddr, sizeof(Elf64_Verneed));
    if (!v || rd16(v) != 1) return bad(e, "has a malformed version requirement");
    /* the loader asserts that the library a requirement names is loaded */
    if (!str(e, rd32(v + 4)) || !is_needed(e, str(e, rd32(v + 4))))
      return bad(e, "requires versions of a library it does not need");
    uint64_t aux = vaddr + rd32(v + 8);
    for (int k = 0; k < MAX_CHAIN; k++) {
      const uint8_t* a = at(e, aux, sizeof(Elf64_Vernaux));
      if (!a || !str(e, rd32(a + 8))) return bad(e, "has a malformed version requirement");
      if ((rd16(a + 6) & 0x7fff) > e->ndx_high) e->ndx_high = rd16(a + 6) & 0x7fff;
      if (!rd32(a + 12)) break;
      aux += rd32(a + 12);
    }
    if (aux + sizeof(Elf64_Vernaux) > end) end = aux + sizeof(Elf64_Vernaux);
    vaddr = rd32(v + 12) ? vaddr + rd32(v + 12) : 0;
  }
  if (vaddr) return bad(e, "has too many version requirements");
  if (e->verneed) protect(e, e->verneed, end - e->verneed);
  end = e->verdef;
  vaddr = e->verdef;
  for (int n = 0; vaddr && n < MAX_CHAIN; n++) {
    const uint8_t* v = at(e, vaddr, sizeof(Elf64_Verdef));
    const uint8_t* a = v ? at(e, vaddr + rd32(v + 12), sizeof(Elf64_Verdaux)) : NULL;
    if (!v || rd16(v) != 1 || !a || !str(e, rd32(a))) return bad(e, "has a malformed version definition");
    if ((rd16(v + 4) & 0x7fff) > e->ndx_high) e->ndx_high = rd16(v + 4) & 0x7fff;
    if (vaddr + sizeof(Elf64_Verdef) > end) end = vaddr + sizeof(Elf64_Verdef);
    vaddr = rd32(v + 16) ? vaddr + rd32(v + 16) : 0;
  }
  if (vaddr) return bad(e, "has too many version definitions");
  if (e->verdef) protect(e, e->verdef, end - e->verdef);
  /* the loader reads the symbols' versions whenever versions are defined or needed */
  if ((e->verneed || e->verdef) && !e->versym) return bad(e, "has versions but no symbol version table");
  if (e->versym) {
    const uint8_t* vs = at(e, e->versym, 2 * e->nsyms);
    /* the loader indexes its table of ndx_high + 1 versions with these (none allocated when ndx_high is 0) */
    if (!vs || !e->ndx_high) return bad(e, "has a malformed symbol version table");
    for (uint64_t i = 0; i < e->nsyms; i++)
      if ((rd16(vs + 2 * i) & 0x7fff) > e->ndx_high)
        return bad(e, "has symbol %llu of an unknown version", (unsigned long long)i);
    protect(e, e->versym, 2 * e->nsyms);
  }
  return TSR_SUCCESS;
}

/* ---- relocations -------------------------------------------------------------------------------------- */

#if defined(__aarch64__)
enum { R_ABS = R_AARCH64_ABS64, R_GLOB = R_AARCH64_GLOB_DAT,
       R_SLOT = R_AARCH64_JUMP_SLOT, R_REL = R_AARCH64_RELATIVE };
static bool tls_reloc(uint32_t t) {
  return t == R_AARCH64_TLS_DTPMOD || t == R_AARCH64_TLS_DTPREL || t == R_AARCH64_TLS_TPREL ||
         t == R_AARCH64_TLSDESC;
}
#else
enum { R_ABS = R_X86_64_64, R_GLOB = R_X86_64_GLOB_DAT, R_SLOT = R_X86_64_JUMP_SLOT,
       R_REL = R_X86_64_RELATIVE };
static bool tls_reloc(uint32_t t) {
  return t == R_X86_64_DTPMOD64 || t == R_X86_64_DTPOFF64 || t == R_X86_64_TPOFF64;
}
#endif

/* A relocation (or RELR) writes 8 bytes at `target`: inside a writable segment, outside the loader's tables. */
static bool writable_target(const elf_t* e, uint64_t target) {
  const segment_t* s = segment_of(e, target, 8, false);
  if (!s || !(s->flags & PF_W)) return false;
  for (int i = 0; i < e->nprotected; i++)
    if (target < e->protected[i].vaddr + e->protected[i].size && e->protected[i].vaddr < target + 8) return false;
  return true;
}

static tsr_status_t check_rela(const elf_t* e, uint64_t vaddr, uint64_t size) {
  if (!vaddr) return TSR_SUCCESS;
  const uint8_t* r = at(e, vaddr, size);
  if (!r || size % sizeof(Elf64_Rela)) return bad(e, "has its relocations outside its image");
  for (uint64_t i = 0; i < size; i += sizeof(Elf64_Rela)) {
    uint64_t offset = rd64(r + i), info = rd64(r + i + 8);
    uint32_t type = ELF64_R_TYPE(info);
    uint64_t sym = ELF64_R_SYM(info);
    /* R_NONE too: the loader reads every entry's symbol version, and takes the first DT_RELACOUNT entries for
     * relative ones, whatever their type */
    if (type != R_ABS && type != R_GLOB && type != R_SLOT && type != R_REL && !tls_reloc(type))
      return bad(e, "has a relocation of type %u, which a CPU code section may not have", type);
    if (sym >= e->nsyms || !writable_target(e, offset))
      return bad(e, "has a relocation of a symbol or place outside its image");
  }
  return TSR_SUCCESS;
}

static tsr_status_t check_relr(const elf_t* e) {
  if (!e->relr) return TSR_SUCCESS;
  const uint8_t* r = at(e, e->relr, e->relrsz);
  if (!r || e->relrsz % 8) return bad(e, "has its relocations outside its image");
  uint64_t where = 0;
  for (uint64_t i = 0; i < e->relrsz; i += 8) {
    uint64_t entry = rd64(r + i);
    if (!(entry & 1)) {
      if (!writable_target(e, entry)) return bad(e, "has a relocation of a place outside its image");
      where = entry + 8;
      continue;
    }
    for (int bit = 1; bit < 64; bit++)
      if (entry >> bit & 1 && !writable_target(e, where + 8 * (uint64_t)(bit - 1)))
        return bad(e, "has a relocation of a place outside its image");
    where += 63 * 8;
  }
  return TSR_SUCCESS;
}

static tsr_status_t check_pltgot(const elf_t* e) {
  /* the loader's lazy binding writes the GOT's second and third slots */
  if (e->pltgot && (!writable_target(e, e->pltgot + 8) || !writable_target(e, e->pltgot + 16)))
    return bad(e, "has its PLT's GOT outside its image");
  return TSR_SUCCESS;
}

/* ---- the whole ---------------------------------------------------------------------------------------- */

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
  if (phentsize != sizeof(Elf64_Phdr) || phnum == 0 || phnum > MAX_PHNUM || phoff > size ||
      phnum * phentsize > size - phoff || phoff % 8)
    return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: section '%s' has a malformed program header table", section);
  elf_t* e = calloc(1, sizeof *e);
  if (!e) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory checking CPU code");
  *e = (elf_t){.b = b, .size = size, .section = section};
  tsr_status_t st = check_program_headers(e, phoff, phnum);
  uint64_t dyn_vaddr = 0, dyn_size = 0;
  for (uint64_t i = 0; !st && i < phnum; i++)
    if (rd32(b + phoff + i * sizeof(Elf64_Phdr)) == PT_DYNAMIC) {
      dyn_vaddr = rd64(b + phoff + i * sizeof(Elf64_Phdr) + 16);
      dyn_size = rd64(b + phoff + i * sizeof(Elf64_Phdr) + 32);
    }
  if (!st) st = read_dynamic(e, dyn_vaddr, dyn_size);
  if (!st) {
    protect(e, dyn_vaddr, dyn_size);
    const uint8_t* strings = at(e, e->strtab, e->strsz);
    if (!strings || strings[e->strsz - 1]) st = bad(e, "has a string table outside its image or unterminated");
    else protect(e, e->strtab, e->strsz);
  }
  for (int i = 0; !st && i < e->nneeded; i++)
    if (!str(e, e->needed[i] & ~((uint64_t)1 << 63))) st = bad(e, "names a library out of its string table");
  if (!st && e->gnu_hash) st = check_gnu_hash(e);
  if (!st && e->hash) st = check_sysv_hash(e);
  if (!st) st = check_symbols(e);
  if (!st) st = check_versions(e);
  if (!st) {
    protect(e, e->rela, e->relasz);
    protect(e, e->jmprel, e->pltrelsz);
    protect(e, e->relr, e->relrsz);
    st = check_rela(e, e->rela, e->relasz);
  }
  if (!st) st = check_rela(e, e->jmprel, e->pltrelsz);
  if (!st) st = check_relr(e);
  if (!st) st = check_pltgot(e);
  free(e);
  return st;
}

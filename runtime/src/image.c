/* image.c — parses and validates a `.tessera` image (docs/image-format.md) from untrusted bytes.
 *
 * Everything is read through bounds-checked little-endian loads: no struct is overlaid on the buffer, so
 * alignment and host byte order do not matter, and every offset, size, count and string is checked before
 * use. Any defect is TSR_ERROR_BAD_IMAGE with a message naming it. */
#include "image.h"

#include <elf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "plan.h"

#define BAD(...) tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: " __VA_ARGS__)

enum {
  EHDR_SIZE = 64,
  SHDR_SIZE = 64,
  META_HEADER_SIZE = 32,
  META_KERNEL_SIZE = 64,  /* minimum record sizes of table layout 1.0; larger records are from newer minors */
  META_ARG_SIZE = 16,
  NT_TESSERA_ABI_VERSION = 1,
  NT_TESSERA_IR_VERSION = 2,  /* ir major, ir minor, bytecode version, plan version: u32 each */
  DTYPE_MAX = 17,
};

static uint16_t rd16(const uint8_t* p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t* p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- ELF header and section table ------------------------------------------------------------------- */

typedef struct elf_layout {
  uint64_t shoff;
  uint16_t shnum, shstrndx;
} elf_layout_t;

static tsr_status_t parse_elf_header(const uint8_t* d, size_t size, elf_layout_t* out) {
  if (size < EHDR_SIZE) return BAD("%zu bytes is smaller than an ELF64 header", size);
  if (memcmp(d, ELFMAG, SELFMAG) != 0) return BAD("no ELF magic (not a .tessera image)");
  if (d[EI_CLASS] != ELFCLASS64) return BAD("not ELF64 (EI_CLASS %u)", d[EI_CLASS]);
  if (d[EI_DATA] != ELFDATA2LSB) return BAD("not little-endian (EI_DATA %u)", d[EI_DATA]);
  if (d[EI_VERSION] != EV_CURRENT || rd32(d + 20) != EV_CURRENT) return BAD("unknown ELF version");
  uint16_t type = rd16(d + 16), machine = rd16(d + 18);
  if (type != ET_REL)
    return BAD("e_type is %u, expected ET_REL (%s)", type,
               type == ET_DYN ? "a shared object is not an image; compile it with tessera-cc" : "not an image");
  if (machine != EM_NONE) return BAD("e_machine is %u, expected EM_NONE", machine);
  uint16_t shentsize = rd16(d + 58);
  out->shoff = rd64(d + 40);
  out->shnum = rd16(d + 60);
  out->shstrndx = rd16(d + 62);
  if (out->shnum == 0) return BAD("no section headers");
  if (shentsize != SHDR_SIZE) return BAD("e_shentsize is %u, expected %d", shentsize, SHDR_SIZE);
  uint64_t table = (uint64_t)out->shnum * SHDR_SIZE;
  if (out->shoff < EHDR_SIZE || out->shoff > size || table > size - out->shoff)
    return BAD("section header table (offset %llu, %u entries) lies outside the %zu-byte image",
               (unsigned long long)out->shoff, out->shnum, size);
  if (out->shstrndx == SHN_UNDEF || out->shstrndx >= out->shnum)
    return BAD("e_shstrndx %u is not a section index", out->shstrndx);
  return TSR_SUCCESS;
}

static bool has_file_bytes(uint32_t type, uint64_t size) { return type != SHT_NULL && type != SHT_NOBITS && size; }

/* A string table must be non-empty and end with NUL, so that every offset inside it names a terminated string
 * (gABI rule; it also makes each string check O(1)). */
static tsr_status_t check_string_table(const char* what, const uint8_t* data, uint64_t size) {
  if (size == 0 || data[0] != 0) return BAD("%s must begin with a NUL byte", what);
  if (data[size - 1] != 0) return BAD("%s does not end with NUL (unterminated string)", what);
  return TSR_SUCCESS;
}

static tsr_status_t read_sections(const uint8_t* d, size_t size, const elf_layout_t* elf, tsr_image_t* img) {
  img->section_count = elf->shnum;
  img->sections = calloc(elf->shnum, sizeof *img->sections);
  if (!img->sections) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory reading the section table");
  for (uint16_t i = 0; i < elf->shnum; i++) {
    const uint8_t* sh = d + elf->shoff + (uint64_t)i * SHDR_SIZE;
    tsr_image_section_t* s = &img->sections[i];
    uint64_t offset = rd64(sh + 24);
    s->type = rd32(sh + 4);
    s->size = rd64(sh + 32);
    if (!has_file_bytes(s->type, s->size)) continue;
    if (offset > size || s->size > size - offset)
      return BAD("section %u (offset %llu, size %llu) runs past the end of the %zu-byte image", i,
                 (unsigned long long)offset, (unsigned long long)s->size, size);
    s->data = d + offset;
  }

  const tsr_image_section_t* names = &img->sections[elf->shstrndx];
  if (names->type != SHT_STRTAB) return BAD("section %u named by e_shstrndx is not SHT_STRTAB", elf->shstrndx);
  tsr_status_t st = check_string_table("the section name table", names->data, names->size);
  if (st) return st;
  for (uint16_t i = 0; i < elf->shnum; i++) {
    uint32_t name = rd32(d + elf->shoff + (uint64_t)i * SHDR_SIZE);
    if (name >= names->size) return BAD("section %u has a name offset %u outside .shstrtab", i, name);
    img->sections[i].name = (const char*)names->data + name;
  }
  return TSR_SUCCESS;
}

/* ---- overlap: ELF header, section header table and section contents must be disjoint ------------------ */

typedef struct extent {
  uint64_t begin, end;
  const char* what;
} extent_t;

static int by_begin(const void* a, const void* b) {
  const extent_t *x = a, *y = b;
  return (x->begin > y->begin) - (x->begin < y->begin);
}

static tsr_status_t check_disjoint(const uint8_t* d, const elf_layout_t* elf, const tsr_image_t* img) {
  extent_t* ext = malloc(((size_t)img->section_count + 2) * sizeof *ext);
  if (!ext) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory checking section layout");
  size_t n = 0;
  ext[n++] = (extent_t){0, EHDR_SIZE, "the ELF header"};
  ext[n++] = (extent_t){elf->shoff, elf->shoff + (uint64_t)elf->shnum * SHDR_SIZE, "the section header table"};
  for (uint16_t i = 0; i < img->section_count; i++) {
    const tsr_image_section_t* s = &img->sections[i];
    if (!has_file_bytes(s->type, s->size)) continue;
    uint64_t begin = (uint64_t)(s->data - d);
    ext[n++] = (extent_t){begin, begin + s->size, s->name};
  }
  qsort(ext, n, sizeof *ext, by_begin);
  tsr_status_t st = TSR_SUCCESS;
  for (size_t i = 1; i < n && !st; i++)
    if (ext[i].begin < ext[i - 1].end) st = BAD("'%s' overlaps '%s'", ext[i].what, ext[i - 1].what);
  free(ext);
  return st;
}

/* ---- lookup by name: sections sorted by name, so that a lookup per kernel stays cheap on huge tables ---- */

static int by_name(const void* a, const void* b) {
  return strcmp(((const tsr_image_section_t*)a)->name, ((const tsr_image_section_t*)b)->name);
}

const tsr_image_section_t* tsr_image_find_section(const tsr_image_t* img, const char* name) {
  tsr_image_section_t key = {.name = name};
  const tsr_image_section_t* hit = bsearch(&key, img->sections, img->section_count, sizeof key, by_name);
  if (!hit) {
    BAD("no section named '%s'", name);
    return NULL;
  }
  bool dup = (hit > img->sections && strcmp(hit[-1].name, name) == 0) ||
             (hit + 1 < img->sections + img->section_count && strcmp(hit[1].name, name) == 0);
  if (dup) {
    BAD("more than one section named '%s'", name);
    return NULL;
  }
  return hit;
}

static const tsr_image_section_t* required(const tsr_image_t* img, const char* name, uint32_t type) {
  const tsr_image_section_t* s = tsr_image_find_section(img, name);
  if (!s) return NULL;
  if (s->type != type) {
    BAD("section '%s' has type %u, expected %u", name, s->type, type);
    return NULL;
  }
  return s;
}

/* ---- the ABI note ------------------------------------------------------------------------------------ */

static uint64_t align4(uint64_t n) { return (n + 3) & ~(uint64_t)3; }

static tsr_status_t parse_abi_note(const tsr_image_section_t* note, tsr_image_t* img) {
  bool found = false;
  uint64_t off = 0;
  while (off < note->size) {
    if (note->size - off < 12)
      return BAD(".note.tessera: truncated note header at offset %llu", (unsigned long long)off);
    const uint8_t* p = note->data + off;
    uint64_t namesz = rd32(p), descsz = rd32(p + 4), type = rd32(p + 8);
    uint64_t total = 12 + align4(namesz) + align4(descsz);
    if (total > note->size - off)
      return BAD(".note.tessera: note at offset %llu runs past the section", (unsigned long long)off);
    const uint8_t* name = p + 12;
    const uint8_t* desc = name + align4(namesz);
    if (namesz == 8 && memcmp(name, "Tessera", 8) == 0 && type == NT_TESSERA_IR_VERSION) {
      if (img->has_versions) return BAD(".note.tessera holds more than one IR version note");
      if (descsz != 16)
        return BAD("IR version note has a %llu-byte descriptor, expected 16", (unsigned long long)descsz);
      img->ir_major = rd32(desc);
      img->ir_minor = rd32(desc + 4);
      img->bytecode_version = rd32(desc + 8);
      img->plan_version = rd32(desc + 12);
      img->has_versions = true;
    }
    if (namesz == 8 && memcmp(name, "Tessera", 8) == 0 && type == NT_TESSERA_ABI_VERSION) {
      if (found) return BAD(".note.tessera holds more than one ABI version note");
      if (descsz != 8)
        return BAD("ABI version note has a %llu-byte descriptor, expected 8", (unsigned long long)descsz);
      img->abi_major = rd32(desc);
      img->abi_minor = rd32(desc + 4);
      found = true;
    }
    off += total;
  }
  if (!found) return BAD(".note.tessera has no 'Tessera' ABI version note");
  return TSR_SUCCESS;
}

tsr_status_t tsr_image_check_plan_version(const tsr_image_t* img) {
  if (!img->has_versions)
    return BAD("the image records no plan version (it was made before images recorded one, version 0); this "
               "runtime reads launch plans of version %d or version %d: recompile it from its source",
               TSR_PLAN_VERSION_MIN, TSR_PLAN_VERSION);
  if (img->plan_version < TSR_PLAN_VERSION_MIN || img->plan_version > TSR_PLAN_VERSION)
    return BAD("the image's launch plans are version %u; this runtime reads version %d or version %d: recompile "
               "it from its source with this release", img->plan_version, TSR_PLAN_VERSION_MIN, TSR_PLAN_VERSION);
  return TSR_SUCCESS;
}

/* ---- .tessera.meta ----------------------------------------------------------------------------------- */

static bool str_ok(const tsr_image_t* img, uint32_t off) { return off < img->strtab_size; }

/* Reserves `count` records of `record_size` bytes at *offset in the meta section. */
static tsr_status_t take(uint64_t* offset, uint64_t count, uint64_t record_size, uint64_t meta_size, const char* what) {
  uint64_t bytes = count * record_size;  /* both < 2^32: no overflow */
  if (*offset > meta_size || bytes > meta_size - *offset)
    return BAD(".tessera.meta: %llu %s records run past the end of the %llu-byte section", (unsigned long long)count,
               what, (unsigned long long)meta_size);
  *offset += bytes;
  return TSR_SUCCESS;
}

static tsr_status_t check_args(tsr_image_t* img) {
  for (uint32_t i = 0; i < img->arg_count; i++) {
    const tsr_image_arg_t* a = &img->args[i];
    if (!str_ok(img, a->name)) return BAD("argument %u: name offset %u outside .tessera.strtab", i, a->name);
    if (a->kind > TSR_ARG_DIMENSION) return BAD("argument %u: unknown kind %u", i, a->kind);
    bool typed = a->kind != TSR_ARG_DIMENSION;
    if (a->dtype > DTYPE_MAX || (typed && a->dtype == 0)) return BAD("argument %u: unknown dtype %u", i, a->dtype);
    if (a->kind != TSR_ARG_TENSOR && a->rank) return BAD("argument %u: rank %u on a non-tensor", i, a->rank);
    if (a->rank && (uint64_t)a->dims_first + a->rank > img->dim_count)
      return BAD("argument %u: dimensions [%u, +%u) outside the %u-entry dimension table", i, a->dims_first, a->rank,
                 img->dim_count);
  }
  return TSR_SUCCESS;
}

/* A negative dimension entry names a dimension argument of the same kernel. */
static tsr_status_t check_dim_refs(const tsr_image_t* img, uint32_t k, const tsr_image_kernel_t* kr) {
  for (uint32_t i = 0; i < kr->arg_count; i++) {
    const tsr_image_arg_t* a = &img->args[kr->arg_first + i];
    for (uint32_t r = 0; r < a->rank; r++) {
      int64_t dim = img->dims[a->dims_first + r];
      if (dim >= 0) continue;
      uint64_t ref = (uint64_t)(-(dim + 1));
      if (ref >= kr->arg_count || img->args[kr->arg_first + ref].kind != TSR_ARG_DIMENSION)
        return BAD("kernel %u argument %u: extent %u refers to argument %llu, which is not one of its dimension "
                   "arguments", k, i, r, (unsigned long long)ref);
    }
  }
  return TSR_SUCCESS;
}

static tsr_status_t check_kernel(const tsr_image_t* img, uint32_t k, uint32_t prop_count) {
  const tsr_image_kernel_t* kr = &img->kernels[k];
  const struct { uint32_t off; const char* field; } strings[] = {
      {kr->name, "name"}, {kr->entry, "entry"}, {kr->target, "target"}, {kr->arch, "arch"}, {kr->section, "section"}};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    if (!str_ok(img, strings[i].off))
      return BAD("kernel %u: %s offset %u outside .tessera.strtab", k, strings[i].field, strings[i].off);
    if (!img->strtab[strings[i].off]) return BAD("kernel %u: empty %s", k, strings[i].field);
  }
  const char* name = tsr_image_str(img, kr->name);
  if ((uint64_t)kr->arg_first + kr->arg_count > img->arg_count)
    return BAD("kernel '%s': arguments [%u, +%u) outside the %u-record argument table", name, kr->arg_first,
               kr->arg_count, img->arg_count);
  if ((uint64_t)kr->prop_first + kr->prop_count > prop_count)
    return BAD("kernel '%s': properties [%u, +%u) outside the %u-entry property table", name, kr->prop_first,
               kr->prop_count, prop_count);
  const char* section = tsr_image_str(img, kr->section);
  const tsr_image_section_t* code = tsr_image_find_section(img, section);
  if (!code) return BAD("kernel '%s': code section '%s' is missing or not unique", name, section);
  if (code->type != SHT_PROGBITS) return BAD("kernel '%s': code section '%s' is not SHT_PROGBITS", name, code->name);
  return check_dim_refs(img, k, kr);
}

static tsr_status_t parse_meta(const tsr_image_section_t* meta, tsr_image_t* img) {
  const uint8_t* m = meta->data;
  if (meta->size < META_HEADER_SIZE) return BAD(".tessera.meta is %llu bytes, smaller than its header",
                                                (unsigned long long)meta->size);
  if (memcmp(m, "TSRM", 4) != 0) return BAD(".tessera.meta does not start with 'TSRM'");
  if (rd16(m + 4) != 1) return BAD(".tessera.meta table layout %u.%u is not 1.x", rd16(m + 4), rd16(m + 6));
  uint32_t kernel_size = rd32(m + 12), arg_size = rd32(m + 20), prop_count = rd32(m + 28);
  img->prop_count = prop_count;
  img->kernel_count = rd32(m + 8);
  img->arg_count = rd32(m + 16);
  img->dim_count = rd32(m + 24);
  if (kernel_size < META_KERNEL_SIZE) return BAD(".tessera.meta: kernel records of %u bytes (< 64)", kernel_size);
  if (arg_size < META_ARG_SIZE) return BAD(".tessera.meta: argument records of %u bytes (< 16)", arg_size);

  uint64_t kernels_at = META_HEADER_SIZE, args_at, dims_at, props_at, end = META_HEADER_SIZE;
  tsr_status_t st;
  if ((st = take(&end, img->kernel_count, kernel_size, meta->size, "kernel"))) return st;
  args_at = end;
  if ((st = take(&end, img->arg_count, arg_size, meta->size, "argument"))) return st;
  dims_at = end;
  if ((st = take(&end, img->dim_count, 8, meta->size, "dimension"))) return st;
  props_at = end;
  if ((st = take(&end, prop_count, 8, meta->size, "property"))) return st;

  /* Counts are now bounded by the section size, so these allocations are too. */
  img->kernels = calloc((size_t)img->kernel_count + 1, sizeof *img->kernels);  /* +1: never calloc(0) */
  img->args = calloc((size_t)img->arg_count + 1, sizeof *img->args);
  img->dims = calloc((size_t)img->dim_count + 1, sizeof *img->dims);
  img->props = calloc((size_t)prop_count + 1, sizeof *img->props);
  if (!img->kernels || !img->args || !img->dims || !img->props)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory reading .tessera.meta");

  for (uint32_t i = 0; i < img->arg_count; i++) {
    const uint8_t* r = m + args_at + (uint64_t)i * arg_size;
    img->args[i] = (tsr_image_arg_t){rd32(r), r[4], r[5], rd16(r + 6), rd32(r + 8), rd32(r + 12)};
  }
  for (uint32_t i = 0; i < img->dim_count; i++) img->dims[i] = (int64_t)rd64(m + dims_at + (uint64_t)i * 8);
  for (uint32_t i = 0; i < prop_count; i++) {
    const uint8_t* r = m + props_at + (uint64_t)i * 8;
    img->props[i] = (tsr_image_prop_t){rd32(r), rd32(r + 4)};
    if (!str_ok(img, img->props[i].key) || !str_ok(img, img->props[i].value))
      return BAD("property %u: string offset outside .tessera.strtab", i);
  }
  if ((st = check_args(img))) return st;

  for (uint32_t k = 0; k < img->kernel_count; k++) {
    const uint8_t* r = m + kernels_at + (uint64_t)k * kernel_size;
    img->kernels[k] = (tsr_image_kernel_t){
        .name = rd32(r), .entry = rd32(r + 4), .target = rd32(r + 8), .arch = rd32(r + 12), .section = rd32(r + 16),
        .arg_first = rd32(r + 20), .arg_count = rd32(r + 24), .block = {rd32(r + 28), rd32(r + 32), rd32(r + 36)},
        .warp_size = rd32(r + 40), .smem_bytes = rd32(r + 44), .regs = rd32(r + 48), .flags = rd32(r + 52),
        .prop_first = rd32(r + 56), .prop_count = rd32(r + 60)};
    if ((st = check_kernel(img, k, prop_count))) return st;
  }
  return TSR_SUCCESS;
}

/* ---- entry points ------------------------------------------------------------------------------------ */

static tsr_status_t parse(const uint8_t* d, size_t size, tsr_image_t* img) {
  elf_layout_t elf = {0};
  tsr_status_t st;
  if ((st = parse_elf_header(d, size, &elf))) return st;
  if ((st = read_sections(d, size, &elf, img))) return st;
  if ((st = check_disjoint(d, &elf, img))) return st;
  qsort(img->sections, img->section_count, sizeof *img->sections, by_name);

  const tsr_image_section_t* note = required(img, ".note.tessera", SHT_NOTE);
  if (!note) return TSR_ERROR_BAD_IMAGE;
  if ((st = parse_abi_note(note, img))) return st;
  /* Checked before the tables: another major may lay them out differently. */
  if (img->abi_major != TSR_ABI_MAJOR || img->abi_minor > TSR_ABI_MINOR)
    return tsr_fail(TSR_ERROR_ABI_MISMATCH, "image ABI %u.%u is not loadable by this runtime (ABI %d.%d: same major, "
                    "minor at most %d)", img->abi_major, img->abi_minor, TSR_ABI_MAJOR, TSR_ABI_MINOR, TSR_ABI_MINOR);

  const tsr_image_section_t* strtab = required(img, ".tessera.strtab", SHT_STRTAB);
  if (!strtab) return TSR_ERROR_BAD_IMAGE;
  if ((st = check_string_table("'.tessera.strtab'", strtab->data, strtab->size))) return st;
  img->strtab = (const char*)strtab->data;
  img->strtab_size = strtab->size;

  const tsr_image_section_t* meta = required(img, ".tessera.meta", SHT_PROGBITS);
  if (!meta) return TSR_ERROR_BAD_IMAGE;
  return parse_meta(meta, img);
}

tsr_status_t tsr_image_parse(const void* data, size_t size, tsr_image_t* out) {
  if (!data) return tsr_fail(TSR_ERROR_INVALID_VALUE, "image pointer is NULL");
  tsr_image_t img = {0};
  tsr_status_t st = parse(data, size, &img);
  if (st) {
    tsr_image_release(&img);
    return st;
  }
  *out = img;
  return TSR_SUCCESS;
}

void tsr_image_release(tsr_image_t* img) {
  free(img->sections);
  free(img->kernels);
  free(img->args);
  free(img->dims);
  free(img->props);
  *img = (tsr_image_t){0};
}

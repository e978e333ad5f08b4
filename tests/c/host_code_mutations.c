/* host_code_mutations.c — damages the shared object inside an image's CPU code section, aiming at the
 * structures the system's dynamic loader trusts, and loads each result with the real loader (dlopen). Every
 * load must succeed or be refused with its status; the process must live through all of them.
 *
 *   host_code_mutations IMAGE [RANDOM_RUNS [SEED]]
 *
 * The structures are found in the good object itself: the ELF header, the program header table, the dynamic
 * section, the GNU and SysV hash tables, the dynamic symbol and string tables, the version tables, the
 * relocation tables and the initializer arrays. Three campaigns:
 *   - sweep: every byte of the headers, the dynamic section and the hash tables, set to 0x00, 0xff, +1, and
 *     with its low and high bits flipped;
 *   - fields: every aligned 2-, 4- and 8-byte field of every structure, set to values that point elsewhere
 *     (0, 1, -1, the object's size and around it, large and sign-bit values, other tables' addresses);
 *   - random: 1 to 4 random changes of bytes and fields of random structures (the whole object among them)
 *     per image (RANDOM_RUNS, default 20000; SEED, default 0, picks another sequence of them).
 * Prints the counts; exits non-zero only if the image has no CPU code or the good image does not load. */
#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

static uint64_t get(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put(uint8_t* p, int width, uint64_t v) {
  for (int i = 0; i < width; i++, v >>= 8) p[i] = (uint8_t)v;
}

typedef struct region {
  const char* what;
  uint64_t offset, size; /* within the shared object */
} region_t;

static uint8_t* image;         /* the good image */
static size_t image_size;
static uint64_t code_offset;   /* the code section's offset in the image */
static uint64_t code_size;
static region_t regions[32];
static int nregions;
static uint64_t addresses[32]; /* the tables' addresses, as values a damaged pointer may take */
static int naddresses;
static tsr_context_t ctx;
static uint8_t* scratch;
static size_t loads, loaded;

static void fail(const char* why) {
  fprintf(stderr, "host_code_mutations: %s\n", why);
  exit(2);
}

/* ---- the good object's structures --------------------------------------------------------------------- */

static void find_code_section(void) {
  uint64_t shoff = get(image + 40, 8), shnum = get(image + 60, 2), shstrndx = get(image + 62, 2);
  const char* names = (const char*)image + get(image + shoff + shstrndx * 64 + 24, 8);
  for (uint64_t i = 0; i < shnum; i++) {
    const uint8_t* sh = image + shoff + i * 64;
    if (strcmp(names + get(sh, 4), ".tessera.code.cpu") == 0) {
      code_offset = get(sh + 24, 8);
      code_size = get(sh + 32, 8);
      return;
    }
  }
  fail("the image has no .tessera.code.cpu section");
}

/* The object's file offset of address `vaddr` (the good object maps it through one of its segments). */
static bool offset_of(uint64_t vaddr, uint64_t* out) {
  const uint8_t* so = image + code_offset;
  uint64_t phoff = get(so + 32, 8), phnum = get(so + 56, 2);
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* ph = so + phoff + i * 56;
    uint64_t va = get(ph + 16, 8), filesz = get(ph + 32, 8);
    if (get(ph, 4) == PT_LOAD && vaddr >= va && vaddr < va + filesz) {
      *out = get(ph + 8, 8) + (vaddr - va);
      return true;
    }
  }
  return false;
}

static void add(const char* what, uint64_t vaddr, uint64_t size, bool is_address) {
  uint64_t offset;
  if (!size || !offset_of(vaddr, &offset) || offset + size > code_size || nregions == 32) return;
  regions[nregions++] = (region_t){what, offset, size};
  if (is_address && naddresses < 32) addresses[naddresses++] = vaddr;
}

static void find_structures(void) {
  const uint8_t* so = image + code_offset;
  uint64_t phoff = get(so + 32, 8), phnum = get(so + 56, 2);
  regions[nregions++] = (region_t){"whole object", 0, code_size};
  regions[nregions++] = (region_t){"ELF header", 0, 64};
  regions[nregions++] = (region_t){"program headers", phoff, phnum * 56};
  uint64_t dyn = 0, dynsz = 0;
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* ph = so + phoff + i * 56;
    if (get(ph, 4) == PT_DYNAMIC) dyn = get(ph + 16, 8), dynsz = get(ph + 32, 8);
    if (get(ph, 4) == PT_NOTE) add("notes", get(ph + 16, 8), get(ph + 32, 8), false);
  }
  add("dynamic section", dyn, dynsz, true);
  uint64_t d;
  if (!offset_of(dyn, &d)) fail("the good object has no dynamic section");
  uint64_t v[64] = {0};
  for (uint64_t i = 0; i + 16 <= dynsz; i += 16) {
    uint64_t tag = get(so + d + i, 8), value = get(so + d + i + 8, 8);
    if (tag == DT_NULL) break;
    if (tag < 64) v[tag] = value;
    else if (tag == DT_GNU_HASH) v[DT_HASH + 32] = value;
    else if (tag == DT_VERSYM) v[33] = value;
    else if (tag == DT_VERNEED) v[34] = value;
    else if (tag == DT_VERDEF) v[35] = value;
  }
  uint64_t nsyms = 0, off;
  if (v[DT_HASH] && offset_of(v[DT_HASH], &off)) {
    nsyms = get(so + off + 4, 4);
    add("SysV hash table", v[DT_HASH], 8 + 4 * (get(so + off, 4) + nsyms), true);
  }
  uint64_t gnu = v[DT_HASH + 32];
  if (gnu && offset_of(gnu, &off)) {
    uint64_t nbuckets = get(so + off, 4), symoffset = get(so + off + 4, 4), bloom = get(so + off + 8, 4);
    uint64_t buckets = off + 16 + 8 * bloom, last = 0;
    for (uint64_t b = 0; b < nbuckets; b++)
      if (get(so + buckets + 4 * b, 4) > last) last = get(so + buckets + 4 * b, 4);
    uint64_t n = last;
    if (last)
      while (!(get(so + buckets + 4 * nbuckets + 4 * (n - symoffset), 4) & 1)) n++;
    if (n + 1 > nsyms) nsyms = last ? n + 1 : symoffset;
    add("GNU hash table", gnu, 16 + 8 * bloom + 4 * nbuckets + 4 * (nsyms - symoffset), true);
  }
  add("dynamic symbols", v[DT_SYMTAB], nsyms * 24, true);
  add("dynamic strings", v[DT_STRTAB], v[DT_STRSZ], true);
  add("symbol versions", v[33], nsyms * 2, true);
  add("version requirements", v[34], 64, true);
  add("version definitions", v[35], 64, true);
  add("relocations", v[DT_RELA], v[DT_RELASZ], true);
  add("PLT relocations", v[DT_JMPREL], v[DT_PLTRELSZ], true);
  add("initializers", v[DT_INIT_ARRAY], v[DT_INIT_ARRAYSZ], true);
  add("finalizers", v[DT_FINI_ARRAY], v[DT_FINI_ARRAYSZ], true);
}

/* ---- loading ------------------------------------------------------------------------------------------ */

static bool trace; /* TESSERA_TRACE_MUTATIONS=1: each change is printed before its load (to find a crash's) */

/* Loads the scratch image (the good one, changed), resolving every kernel, and unloads it. */
static void load_scratch(void) {
  tsr_module_t m;
  loads++;
  if (trace) fprintf(stderr, "load %zu\n", loads);
  if (tsrLoadModule(ctx, scratch, image_size, &m) != TSR_SUCCESS) return;
  loaded++;
  size_t n = 0;
  tsrModuleGetKernelCount(m, &n);
  for (size_t i = 0; i < n; i++) {
    const char* name;
    tsr_kernel_t k;
    if (tsrModuleGetKernelName(m, i, &name) == TSR_SUCCESS) tsrGetKernel(m, name, &k);
  }
  tsrUnloadModule(m);
}

static uint8_t* so_byte(uint64_t offset) { return scratch + code_offset + offset; }

static void change(const region_t* reg, uint64_t at, int width, uint64_t value) {
  if (trace)
    fprintf(stderr, "%s +%llu (%d bytes) = %#llx\n", reg->what, (unsigned long long)(at - reg->offset), width,
            (unsigned long long)value);
  put(so_byte(at), width, value);
}

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state >> 11;
}

/* A value for a damaged field: one that points somewhere else, or is merely large. */
static uint64_t interesting(uint64_t old, uint64_t r) {
  switch (r % 14) {
    case 0: return 0;
    case 1: return 1;
    case 2: return ~0ull;
    case 3: return code_size;
    case 4: return code_size - 8;
    case 5: return code_size + 4096;
    case 6: return 0x7fffffffull;
    case 7: return 0x80000000ull;
    case 8: return 1ull << 63;
    case 9: return old + 8;
    case 10: return old - 8;
    case 11: return old ^ (1ull << (r / 14 % 64));
    case 12: return naddresses ? addresses[r / 14 % naddresses] : old;
    default: return next();
  }
}

static size_t sweep(void) {
  size_t runs = 0;
  for (int g = 0; g < nregions; g++) {
    const region_t* reg = &regions[g];
    bool swept = strstr(reg->what, "header") || strstr(reg->what, "dynamic section") || strstr(reg->what, "hash");
    if (!swept) continue;
    for (uint64_t i = 0; i < reg->size; i++) {
      uint8_t good = image[code_offset + reg->offset + i];
      const uint8_t values[] = {0x00, 0xff, (uint8_t)(good + 1), (uint8_t)(good ^ 0x01), (uint8_t)(good ^ 0x80)};
      for (size_t k = 0; k < sizeof values; k++) {
        if (values[k] == good) continue;
        change(reg, reg->offset + i, 1, values[k]);
        load_scratch();
        *so_byte(reg->offset + i) = good;
        runs++;
      }
    }
  }
  return runs;
}

static size_t fields(void) {
  size_t runs = 0;
  for (int g = 1; g < nregions; g++) { /* each structure (not the whole object, whose fields are theirs) */
    const region_t* reg = &regions[g];
    for (int width = 2; width <= 8; width *= 2)
      for (uint64_t i = 0; i + (uint64_t)width <= reg->size; i += (uint64_t)width) {
        uint8_t* p = so_byte(reg->offset + i);
        uint64_t good = get(p, width);
        for (int k = 0; k < 4; k++) {
          change(reg, reg->offset + i, width, interesting(good, next()));
          load_scratch();
          runs++;
        }
        put(p, width, good);
      }
  }
  return runs;
}

static size_t random_runs(size_t runs) {
  for (size_t r = 0; r < runs; r++) {
    memcpy(scratch, image, image_size);
    for (int changes = 1 + (int)(next() % 4); changes; changes--) {
      const region_t* reg = &regions[next() % (uint64_t)nregions];
      int width = next() % 2 ? 1 : 1 << (next() % 4);
      if (reg->size < (uint64_t)width) continue;
      uint64_t at = reg->offset + next() % (reg->size - (uint64_t)width + 1);
      change(reg, at, width, width == 1 ? next() : interesting(get(so_byte(at), width), next()));
    }
    load_scratch();
  }
  memcpy(scratch, image, image_size);
  return runs;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s IMAGE [RANDOM_RUNS [SEED]]\n", argv[0]);
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) fail("cannot open the image");
  fseek(f, 0, SEEK_END);
  image_size = (size_t)ftell(f);
  rewind(f);
  image = malloc(image_size);
  scratch = malloc(image_size);
  if (!image || !scratch || fread(image, 1, image_size, f) != image_size) fail("cannot read the image");
  fclose(f);
  trace = getenv("TESSERA_TRACE_MUTATIONS") && *getenv("TESSERA_TRACE_MUTATIONS") == '1';
  find_code_section();
  find_structures();
  if (tsrCreateContext(&ctx) != TSR_SUCCESS) fail("cannot create a context");
  memcpy(scratch, image, image_size);
  load_scratch();
  if (loaded != 1) {
    fprintf(stderr, "the good image does not load: %s\n", tsrGetLastErrorMessage());
    return 2;
  }
  for (int g = 0; g < nregions; g++)
    printf("structure %-22s [%#llx, +%llu)\n", regions[g].what, (unsigned long long)regions[g].offset,
           (unsigned long long)regions[g].size);
  size_t total = 0, before = loaded;
  size_t n = sweep();
  printf("sweep   %7zu loads, %6zu still loadable\n", n, loaded - before);
  total += n, before = loaded;
  n = fields();
  printf("fields  %7zu loads, %6zu still loadable\n", n, loaded - before);
  total += n, before = loaded;
  if (argc == 4) state ^= strtoull(argv[3], NULL, 10) * 0x2545f4914f6cdd1dull;
  n = random_runs(argc >= 3 ? (size_t)strtoull(argv[2], NULL, 10) : 20000);
  printf("random  %7zu loads, %6zu still loadable\n", n, loaded - before);
  total += n;
  printf("ok   %zu damaged code sections loaded or refused, no crash\n", total);
  tsrDestroyContext(ctx);
  free(image);
  free(scratch);
  return 0;
}

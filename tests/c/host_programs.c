/* host_programs.c — a deployment host: runs whole compiled programs, the MLP block and the transformer block of
 * examples/graph (mlp.py's mlp_block, transformer_block.py's transformer_block), through the typed wrappers
 * `tessera-cc --emit-header` writes for their `@function`s.
 *
 *   host_programs BACKEND MLP_IMAGE BLOCK_IMAGE DIR NAME=EXTENT...
 *
 * BACKEND names the context's backend: "cpu" or "cuda". The headers mlp.h and transformer_block.h are the ones
 * tessera-cc (or tessera.cheader.image_header) wrote for the two images. For each function F, mlp_block of
 * MLP_IMAGE and transformer_block of BLOCK_IMAGE, the host reads input i from DIR/F.in<i>.bin
 * (raw, as the signature's dtype stores it; its shape is the signature's, each symbolic extent bound by
 * NAME=EXTENT), copies it into device memory, sizes the outputs with tsrFunctionGetResultShapes, calls F on the
 * NULL stream and again on a stream, checks both calls wrote the same bytes, and writes output i to
 * DIR/F.out<i>.bin. */
#include "check.h"

#include "mlp.h"
#include "transformer_block.h"

#define MAX_TENSORS 16
#define MAX_RANK 8

typedef struct tensor {
  DLTensor t;
  int64_t shape[MAX_RANK];
  size_t bytes;
  void* host;  /* the file's bytes (inputs), or the second call's result (outputs) */
} tensor_t;

typedef struct program {
  tsr_function_t fn;
  tsr_function_signature_t sig;
  tensor_t in[MAX_TENSORS], out[MAX_TENSORS];
} program_t;

static int argc_;
static char** argv_;

/* The extent NAME=EXTENT binds on the command line; -1 where none does. */
static int64_t bound(const char* name) {
  size_t n = strlen(name);
  for (int i = 5; i < argc_; i++)
    if (strncmp(argv_[i], name, n) == 0 && argv_[i][n] == '=') return strtoll(argv_[i] + n + 1, NULL, 10);
  return -1;
}

static size_t elements(const DLTensor* t) {
  size_t n = 1;
  for (int r = 0; r < t->ndim; r++) n *= (size_t)t->shape[r];
  return n;
}

static void* device_alloc(tsr_context_t ctx, size_t bytes) {
  void* p;
  MUST(tsrAlloc(ctx, bytes ? bytes : 1, TSR_ALLOC_DEFAULT, &p));
  return p;
}

/* Reads F's inputs into device memory and allocates its outputs, sized by tsrFunctionGetResultShapes. */
static void prepare(tsr_context_t ctx, DLDevice device, const char* dir, program_t* p) {
  MUST(tsrFunctionGetSignature(p->fn, &p->sig));
  if (p->sig.input_count > MAX_TENSORS || p->sig.output_count > MAX_TENSORS) exit(2);
  const DLTensor* in[MAX_TENSORS];
  for (size_t i = 0; i < p->sig.input_count; i++) {
    const tsr_tensor_spec_t* s = &p->sig.inputs[i];
    tensor_t* x = &p->in[i];
    if (s->rank > MAX_RANK) exit(2);
    for (uint32_t r = 0; r < s->rank; r++) {
      x->shape[r] = s->extents[r] >= 0 ? s->extents[r] : bound(s->dims[r]);
      if (x->shape[r] < 0) {
        printf("FAIL %s: input %s: no NAME=EXTENT binds its extent '%s'\n", p->sig.name, s->name, s->dims[r]);
        exit(2);
      }
    }
    x->t = (DLTensor){NULL, device, (int32_t)s->rank, s->dtype, x->shape, NULL, 0};
    x->bytes = elements(&x->t) * s->dtype.bits / 8;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.in%zu.bin", dir, p->sig.name, i);
    size_t got;
    x->host = read_file(path, &got);
    if (got != x->bytes) {
      printf("FAIL %s has %zu bytes; %s's shape needs %zu\n", path, got, s->name, x->bytes);
      exit(2);
    }
    x->t.data = device_alloc(ctx, x->bytes);
    MUST(tsrMemcpy(ctx, x->t.data, x->host, x->bytes, TSR_MEMCPY_HOST_TO_DEVICE));
    in[i] = &x->t;
  }
  size_t total = 0;
  for (size_t o = 0; o < p->sig.output_count; o++) total += p->sig.outputs[o].rank;
  int64_t dims[MAX_TENSORS * MAX_RANK];
  if (total > MAX_TENSORS * MAX_RANK) exit(2);
  MUST(tsrFunctionGetResultShapes(p->fn, in, p->sig.input_count, dims, total));
  const int64_t* d = dims;
  for (size_t o = 0; o < p->sig.output_count; o++) {
    const tsr_tensor_spec_t* s = &p->sig.outputs[o];
    tensor_t* y = &p->out[o];
    memcpy(y->shape, d, sizeof(int64_t) * s->rank);
    d += s->rank;
    y->t = (DLTensor){NULL, device, (int32_t)s->rank, s->dtype, y->shape, NULL, 0};
    y->bytes = elements(&y->t) * s->dtype.bits / 8;
    y->t.data = device_alloc(ctx, y->bytes);
    y->host = malloc(y->bytes ? y->bytes : 1);
    if (!y->host) exit(2);
  }
}

/* The calls, through the generated wrappers: the C compiler checks the count and order of the tensors. */
static tsr_status_t call(program_t* p, tsr_stream_t stream) {
  tensor_t* x = p->in;
  tensor_t* y = p->out;
  if (strcmp(p->sig.name, TESSERA_MLP_BLOCK_NAME) == 0)
    return tessera_mlp_block(p->fn, stream, &x[0].t, &x[1].t, &x[2].t, &x[3].t, &x[4].t, &x[5].t, &y[0].t);
  return tessera_transformer_block(p->fn, stream, &x[0].t, &x[1].t, &x[2].t, &x[3].t, &x[4].t, &x[5].t, &x[6].t,
                                   &x[7].t, &x[8].t, &x[9].t, &x[10].t, &y[0].t);
}

/* Calls F twice, on the NULL stream and on `stream`; checks both gave the same bytes; writes the outputs. */
static void run(tsr_context_t ctx, tsr_stream_t stream, const char* dir, program_t* p) {
  char what[256];
  snprintf(what, sizeof what, "%s on the NULL stream", p->sig.name);
  expect(what, call(p, NULL), TSR_SUCCESS);
  for (size_t o = 0; o < p->sig.output_count; o++)
    MUST(tsrMemcpy(ctx, p->out[o].host, p->out[o].t.data, p->out[o].bytes, TSR_MEMCPY_DEVICE_TO_HOST));
  for (size_t o = 0; o < p->sig.output_count; o++) {  /* poisoned: the second call must write every byte again */
    void* poison = malloc(p->out[o].bytes ? p->out[o].bytes : 1);
    if (!poison) exit(2);
    memset(poison, 0xA5, p->out[o].bytes);
    MUST(tsrMemcpy(ctx, p->out[o].t.data, poison, p->out[o].bytes, TSR_MEMCPY_HOST_TO_DEVICE));
    free(poison);
  }
  snprintf(what, sizeof what, "%s on a stream", p->sig.name);
  expect(what, call(p, stream), TSR_SUCCESS);
  MUST(tsrStreamSynchronize(stream));
  for (size_t o = 0; o < p->sig.output_count; o++) {
    tensor_t* y = &p->out[o];
    void* again = malloc(y->bytes ? y->bytes : 1);
    if (!again) exit(2);
    MUST(tsrMemcpy(ctx, again, y->t.data, y->bytes, TSR_MEMCPY_DEVICE_TO_HOST));
    snprintf(what, sizeof what, "%s: %s is the same on both calls", p->sig.name, p->sig.outputs[o].name);
    check(what, memcmp(again, y->host, y->bytes) == 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.out%zu.bin", dir, p->sig.name, o);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(again, 1, y->bytes, f) != y->bytes) exit(2);
    fclose(f);
    free(again);
  }
}

static void release(tsr_context_t ctx, program_t* p) {
  for (size_t i = 0; i < p->sig.input_count; i++) {
    MUST(tsrFree(ctx, p->in[i].t.data));
    free(p->in[i].host);
  }
  for (size_t o = 0; o < p->sig.output_count; o++) {
    MUST(tsrFree(ctx, p->out[o].t.data));
    free(p->out[o].host);
  }
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s BACKEND MLP_IMAGE BLOCK_IMAGE DIR NAME=EXTENT...\n", argv[0]);
    return 2;
  }
  argc_ = argc;
  argv_ = argv;
  /* the DLPack device of the context's memory (the shared contract of the backends' device types) */
  DLDevice device = {kDLCPU, 0};
  if (strcmp(argv[1], "cuda") == 0 || strcmp(argv[1], "ptx") == 0) {
    device.device_type = kDLCUDA;
  } else if (strcmp(argv[1], "cpu") != 0) {
    fprintf(stderr, "%s: BACKEND is cpu or cuda, not '%s'\n", argv[0], argv[1]);
    return 2;
  }
  tsr_context_options_t options;
  MUST(tsrContextOptionsInitialize(&options));
  options.backend = argv[1];
  tsr_context_t ctx;
  MUST(tsrCreateContextWithOptions(&options, &ctx));
  tsr_module_t mlp = load_test_image(ctx, argv[2]), block = load_test_image(ctx, argv[3]);

  static program_t programs[2];
  MUST(tessera_mlp_block_lookup(mlp, &programs[0].fn));
  MUST(tessera_transformer_block_lookup(block, &programs[1].fn));
  tsr_function_t missing;
  expect_msg("the MLP image has no transformer_block", tessera_transformer_block_lookup(mlp, &missing),
             TSR_ERROR_NOT_FOUND, "transformer_block");
  for (int i = 0; i < 2; i++) prepare(ctx, device, argv[4], &programs[i]);
  check("the header's counts are the image's",
        programs[0].sig.input_count == TESSERA_MLP_BLOCK_NUM_INPUTS &&
            programs[0].sig.output_count == TESSERA_MLP_BLOCK_NUM_OUTPUTS &&
            programs[1].sig.input_count == TESSERA_TRANSFORMER_BLOCK_NUM_INPUTS &&
            programs[1].sig.output_count == TESSERA_TRANSFORMER_BLOCK_NUM_OUTPUTS);

  tsr_stream_t stream;
  MUST(tsrCreateStream(ctx, NULL, &stream));
  for (int i = 0; i < 2; i++) run(ctx, stream, argv[4], &programs[i]);
  MUST(tsrDestroyStream(stream));
  for (int i = 0; i < 2; i++) release(ctx, &programs[i]);
  tsr_memory_stats_t stats;
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("every allocation is freed (the calls' intermediates included)", stats.allocations == 0);
  MUST(tsrUnloadModule(mlp));
  MUST(tsrUnloadModule(block));
  MUST(tsrDestroyContext(ctx));
  printf("%d failed\n", failures);
  return failures;
}

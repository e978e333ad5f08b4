/* host_operator.c — a C host passes operators to a compiled function as the spec's TessOperatorDesc
 * (tessera/operator.h): function `apply_factor` of test_operator_host.py's program takes the factor operator
 * A = U diag(S) V* (an svd descriptor) and x, and returns A x and the operator result B = (2U)* (a dense
 * descriptor with TESS_OP_FLAG_ADJOINT).
 *
 *   host_operator IMAGE DIR
 *
 * reads DIR/U.bin [8, 3], S.bin [3], V.bin [6, 3], x.bin [6, 4] (f32), writes DIR/y.bin [8, 4] and
 * DIR/B.bin [8, 3] (B's payload), prints the function's operator records and one line per check, including
 * descriptors the runtime must refuse. */
#include "check.h"

static DLTensor tensor(float* data, int ndim, int64_t* shape) {
  DLTensor t = {0};
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static float* load(const char* dir, const char* name, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t size;
  float* data = read_file(path, &size);
  if (size != n * sizeof(float)) {
    printf("FAIL %s has %zu bytes, not %zu\n", path, size, n * sizeof(float));
    exit(2);
  }
  return data;
}

static void save(const char* dir, const char* name, const float* data, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(data, sizeof(float), n, f) != n) exit(2);
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s IMAGE DIR\n", argv[0]);
    return 2;
  }
  const char* dir = argv[2];
  tsr_context_t ctx;
  MUST(tsrCreateContext(&ctx));
  tsr_module_t module = load_test_image(ctx, argv[1]);
  tsr_function_t fn;
  MUST(tsrModuleGetFunction(module, "apply_factor", &fn));

  size_t count;
  MUST(tsrFunctionGetOperatorCount(fn, &count));
  check("two operator records (A, a parameter; B, a result)", count == 2);
  tsr_operator_spec_t a, b;
  MUST(tsrFunctionGetOperator(fn, 0, &a));
  MUST(tsrFunctionGetOperator(fn, 1, &b));
  for (size_t i = 0; i < count; i++) {
    const tsr_operator_spec_t* o = i ? &b : &a;
    printf("operator %s: %s repr %d tag %u flags 0x%x payload", o->name, o->is_result ? "result" : "param",
           (int)o->repr, o->tag, o->flags);
    for (uint32_t p = 0; p < o->payload_count; p++) printf(" %u", o->payload[p]);
    printf("\n");
  }
  check("A: a factor parameter, svd, payload U S V", !a.is_result && a.repr == TESS_OP_FACTOR &&
        a.tag == TESS_OP_DECOMP_SVD && a.flags == TESS_OP_FLAG_NORMAL && a.payload_count == 3 &&
        a.payload[0] == 0 && a.payload[1] == 1 && a.payload[2] == 2);
  check("B: a dense result carrying the adjoint flag", b.is_result && b.repr == TESS_OP_DENSE &&
        b.flags == TESS_OP_FLAG_ADJOINT && b.payload_count == 1 && b.payload[0] == 1);
  tsr_operator_spec_t none;
  expect_msg("record 2 does not exist", tsrFunctionGetOperator(fn, 2, &none), TSR_ERROR_INVALID_VALUE,
             "has 2 operators");

  int64_t su[] = {8, 3}, ss[] = {3}, sv[] = {6, 3}, sx[] = {6, 4}, sy[] = {8, 4}, sb[] = {8, 3};
  float *U = load(dir, "U.bin", 24), *S = load(dir, "S.bin", 3), *V = load(dir, "V.bin", 18), *x = load(dir, "x.bin", 24);
  float y[32], B[24];
  TessOperatorDesc A = {.repr = TESS_OP_FACTOR, .tag = TESS_OP_DECOMP_SVD,
                        .flags = TESS_OP_FLAG_NORMAL | TESS_OP_FLAG_UNITARY};  /* a flag more than the record's */
  A.payload[0] = tensor(U, 2, su);
  A.payload[1] = tensor(S, 1, ss);
  A.payload[2] = tensor(V, 2, sv);
  TessOperatorDesc Bd = {.repr = TESS_OP_DENSE, .tag = TESS_OP_TAG_NONE, .flags = TESS_OP_FLAG_ADJOINT};
  Bd.payload[0] = tensor(B, 2, sb);
  DLTensor X = tensor(x, 2, sx), Y = tensor(y, 2, sy);
  const DLTensor* inputs[4] = {NULL, NULL, NULL, &X};
  const DLTensor* outputs[2] = {&Y, NULL};

  /* descriptors the function was not compiled for: refused, nothing written */
  TessOperatorDesc bad = A;
  bad.repr = TESS_OP_DENSE;
  expect_msg("a dense descriptor for the factor operator A", tsrFunctionBindOperator(fn, 0, &bad, inputs, 4, outputs, 2),
             TSR_ERROR_INVALID_VALUE, "operator 'A' of 'apply_factor' is factor, the descriptor dense");
  bad = A;
  bad.tag = TESS_OP_DECOMP_EIG;
  expect_msg("an eig decomposition for A's svd", tsrFunctionBindOperator(fn, 0, &bad, inputs, 4, outputs, 2),
             TSR_ERROR_INVALID_VALUE, "operator 'A' has tag 1 (its decomposition), the descriptor 2");
  bad = A;
  bad.flags = TESS_OP_FLAG_UNITARY;
  expect_msg("a descriptor without A's normal flag", tsrFunctionBindOperator(fn, 0, &bad, inputs, 4, outputs, 2),
             TSR_ERROR_INVALID_VALUE, "it lacks one the function relies on");
  bad = Bd;
  bad.flags = 0;
  expect_msg("B's descriptor without the adjoint flag (ABI spec 5.3)",
             tsrFunctionBindOperator(fn, 1, &bad, inputs, 4, outputs, 2), TSR_ERROR_INVALID_VALUE,
             "an adjoint carries TESS_OP_FLAG_ADJOINT");
  bad = A;
  bad.payload[1].data = NULL;
  expect_msg("a payload tensor without data", tsrFunctionBindOperator(fn, 0, &bad, inputs, 4, outputs, 2),
             TSR_ERROR_INVALID_VALUE, "payload 1 has no data");
  expect_msg("an inputs array too short for A's payload", tsrFunctionBindOperator(fn, 0, &A, inputs, 2, outputs, 2),
             TSR_ERROR_INVALID_VALUE, "the inputs array has 2 entries");
  check("nothing written by the refusals", !inputs[0] && !inputs[1] && !inputs[2] && !outputs[1]);

  expect("bind A", tsrFunctionBindOperator(fn, 0, &A, inputs, 4, outputs, 2), TSR_SUCCESS);
  expect("bind B", tsrFunctionBindOperator(fn, 1, &Bd, inputs, 4, outputs, 2), TSR_SUCCESS);
  check("A's payload in inputs 0-2, B's in output 1", inputs[0] == &A.payload[0] && inputs[1] == &A.payload[1] &&
        inputs[2] == &A.payload[2] && outputs[1] == &Bd.payload[0]);
  expect("call", tsrFunctionCall(fn, NULL, inputs, 4, outputs, 2), TSR_SUCCESS);
  save(dir, "y.bin", y, 32);
  save(dir, "B.bin", B, 24);
  free(U), free(S), free(V), free(x);
  MUST(tsrDestroyContext(ctx));
  return finish();
}

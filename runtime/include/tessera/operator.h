/*
 * operator.h — operators across the ABI: the spec's TessOperatorDesc (programming model Part VI §6.2 and
 * chapter 29) and the calls that pass one to a compiled function. Included by tessera.h; do not include it
 * alone. The reference page is docs/c-api.md ("Operators"); the plan records behind it are in
 * docs/image-format.md ("Operators").
 *
 * Conventions (those of tessera.h, and):
 *  - An operator parameter or result of an `@function` is a group of the function's tensors, its payload: a
 *    dense operator's matrix, a factor operator's U, S and V, an implicit operator's parameters, a block-sparse
 *    operator's blocks and block coordinates. The function's launch plan records each group (its name, its
 *    representation, its tag, its flags and which parameters or results carry the payload);
 *    tsrFunctionGetOperator reads the record, and tsrFunctionBindOperator places a descriptor's payload
 *    tensors in the argument arrays tsrFunctionCall takes, after checking the descriptor against the record.
 *  - The ABI spec's §5.3 contracts are part of every record: a spectral (factor) operator declares its
 *    decomposition (TESS_OP_DECOMP_*, the descriptor's `tag`), an adjoint carries TESS_OP_FLAG_ADJOINT (its
 *    payload is the operator's own, the function applies it conjugate-transposed), and a recursion operator
 *    (TESS_OP_FLAG_RECURSION) declares the stack frame of one recursion level and the most levels it recurses
 *    (tsr_operator_spec_t.frame_bytes, .depth: the descriptor struct, exactly the spec's, has no room for them).
 *  - A descriptor's payload entries past the representation's count are ignored; the flags a record holds are
 *    the promises the compiled function was built on, so a descriptor must carry each of them (it may carry
 *    more).
 */
#ifndef TESSERA_OPERATOR_H_
#define TESSERA_OPERATOR_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The spec's tensor descriptor: a DLPack DLTensor, as function calls take tensors. */
typedef DLTensor TessTensorDesc;

typedef enum {
  TESS_OP_DENSE = 0,
  TESS_OP_FACTOR = 1,
  TESS_OP_IMPLICIT = 2,
  TESS_OP_BLOCKSPARSE = 3
} tess_op_repr_t;

typedef struct {
  tess_op_repr_t repr;
  TessTensorDesc payload[3];  // U,S,V* or matrix or implicit params
  uint32_t tag;               // implicit kind
  uint32_t flags;             // unitary, self_adjoint, normal
} TessOperatorDesc;

/* `flags`: the spec's three properties, then the ABI spec's §5.3 markers. */
#define TESS_OP_FLAG_UNITARY 0x1u
#define TESS_OP_FLAG_SELF_ADJOINT 0x2u
#define TESS_OP_FLAG_NORMAL 0x4u
#define TESS_OP_FLAG_ADJOINT 0x8u    /* the operator is the adjoint of the one its payload describes */
#define TESS_OP_FLAG_RECURSION 0x10u /* applied recursively: the record declares frame_bytes and depth */

/* `tag` of an implicit operator: its kind and payload[0]. */
#define TESS_OP_TAG_NONE 0u
#define TESS_OP_TAG_DIAG 1u   /* diag(d): payload[0] the diagonal d [N] */
#define TESS_OP_TAG_CONV1D 2u /* circular convolution with kernel h on length-N vectors: payload[0] h [m] */

/* `tag` of a factor (spectral) operator U diag(S) V*: its decomposition (payload U [Dout, r], S [r], V [Din, r]). */
#define TESS_OP_DECOMP_SVD 1u  /* U, V orthonormal columns, S >= 0 descending */
#define TESS_OP_DECOMP_EIG 2u  /* square; U eigenvectors, V* = U^-1 */
#define TESS_OP_DECOMP_EIGH 3u /* self-adjoint; U = V unitary, S real */

/* A block-sparse operator's payload: blocks [nnz, b, b], block_rows and block_cols [nnz] of i32 (the block
 * row and column of each block). */

/* The record of one operator parameter or result of a function. Strings live as long as the module. */
typedef struct tsr_operator_spec {
  const char* name;
  int is_result;          /* 0: a parameter (payload indexes the signature's inputs); 1: a result (its outputs) */
  tess_op_repr_t repr;
  uint32_t tag;           /* TESS_OP_TAG_* (implicit), TESS_OP_DECOMP_* (factor), else TESS_OP_TAG_NONE */
  uint32_t flags;         /* TESS_OP_FLAG_* the function was built on */
  uint32_t payload_count; /* 1 (dense, implicit) or 3 (factor, block-sparse) */
  uint32_t payload[3];    /* indices into the signature's inputs (a parameter) or outputs (a result) */
  uint64_t frame_bytes;   /* a recursion operator: the stack frame of one level, in bytes; else 0 */
  uint32_t depth;         /* a recursion operator: the most levels it recurses; else 0 */
} tsr_operator_spec_t;

/* Number of operator parameters and results of the function (0 for a plan older than version 8). */
TSR_API tsr_status_t tsrFunctionGetOperatorCount(tsr_function_t function, size_t* out_count);

/* Record `index` (0 <= index < count, else TSR_ERROR_INVALID_VALUE). */
TSR_API tsr_status_t tsrFunctionGetOperator(tsr_function_t function, size_t index, tsr_operator_spec_t* out_spec);

/* Places the payload tensors of `desc`, the function's operator `index`, in the arrays a call takes: in
 * `inputs` (n_inputs entries: the signature's inputs) for a parameter, in `outputs` (n_outputs: its outputs)
 * for a result; the other array may be NULL. The descriptor's tensors are pointed to, not copied: `desc` must
 * outlive the call. TSR_ERROR_INVALID_VALUE naming the operator, with nothing written, where the descriptor's
 * repr or tag is not the record's, it lacks a flag the record holds (TESS_OP_FLAG_ADJOINT must match either
 * way), a payload tensor has no data, or the array is too short; TSR_ERROR_INVALID_HANDLE (function). The
 * payload's dtypes and extents are checked by the call, as any argument's. */
TSR_API tsr_status_t tsrFunctionBindOperator(tsr_function_t function, size_t index, const TessOperatorDesc* desc,
                                             const DLTensor** inputs, size_t n_inputs, const DLTensor** outputs,
                                             size_t n_outputs);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_OPERATOR_H_ */

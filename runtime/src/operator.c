/* operator.c — operators across the ABI (tessera/operator.h): a function's operator records, read by plan.c
 * with its launch plan, and the binding of a host's TessOperatorDesc to the argument arrays of a call. */
#include <stddef.h>

#include "errors.h"
#include "handles.h"
#include "objects.h"
#include "plan.h"

static const char* const repr_names[] = {"dense", "factor", "implicit", "blocksparse"};

tsr_status_t tsrFunctionGetOperatorCount(tsr_function_t fn, size_t* out_count) {
  if (!tsr_handle_is_live(fn, TSR_MAGIC_FUNCTION)) return tsr_fail_handle(__func__, "function");
  if (!out_count) return tsr_fail_null_output(__func__);
  *out_count = fn->plan->operator_count;
  return TSR_SUCCESS;
}

tsr_status_t tsrFunctionGetOperator(tsr_function_t fn, size_t index, tsr_operator_spec_t* out_spec) {
  if (!tsr_handle_is_live(fn, TSR_MAGIC_FUNCTION)) return tsr_fail_handle(__func__, "function");
  if (!out_spec) return tsr_fail_null_output(__func__);
  if (index >= fn->plan->operator_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFunctionGetOperator: index %zu, but function '%s' has %u operators",
                    index, fn->plan->name, fn->plan->operator_count);
  *out_spec = fn->plan->operators[index];
  return TSR_SUCCESS;
}

static const char* repr_name(tess_op_repr_t r) {
  return (unsigned)r < 4 ? repr_names[r] : "not a tess_op_repr_t";
}

tsr_status_t tsrFunctionBindOperator(tsr_function_t fn, size_t index, const TessOperatorDesc* desc,
                                     const DLTensor** inputs, size_t n_inputs, const DLTensor** outputs,
                                     size_t n_outputs) {
  if (!tsr_handle_is_live(fn, TSR_MAGIC_FUNCTION)) return tsr_fail_handle(__func__, "function");
  if (index >= fn->plan->operator_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFunctionBindOperator: index %zu, but function '%s' has %u operators",
                    index, fn->plan->name, fn->plan->operator_count);
  const tsr_operator_spec_t* o = &fn->plan->operators[index];
  if (!desc) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFunctionBindOperator: operator '%s': the descriptor is NULL",
                             o->name);
  if (desc->repr != o->repr)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFunctionBindOperator: operator '%s' of '%s' is %s, the descriptor %s",
                    o->name, fn->plan->name, repr_names[o->repr], repr_name(desc->repr));
  if (desc->tag != o->tag)
    return tsr_fail(TSR_ERROR_INVALID_VALUE,
                    "tsrFunctionBindOperator: operator '%s' has tag %u (%s), the descriptor %u", o->name, o->tag,
                    o->repr == TESS_OP_FACTOR ? "its decomposition" : "its implicit kind", desc->tag);
  uint32_t missing = o->flags & ~desc->flags;
  if (missing || ((desc->flags ^ o->flags) & TESS_OP_FLAG_ADJOINT))
    return tsr_fail(TSR_ERROR_INVALID_VALUE,
                    "tsrFunctionBindOperator: operator '%s' was compiled for flags 0x%x, the descriptor has 0x%x (%s)",
                    o->name, o->flags, desc->flags,
                    (desc->flags ^ o->flags) & TESS_OP_FLAG_ADJOINT
                        ? "an adjoint carries TESS_OP_FLAG_ADJOINT, and only an adjoint: ABI spec §5.3"
                        : "it lacks one the function relies on");
  const DLTensor** into = o->is_result ? outputs : inputs;
  size_t n = o->is_result ? n_outputs : n_inputs;
  for (uint32_t p = 0; p < o->payload_count; p++) {
    if (!into || o->payload[p] >= n)
      return tsr_fail(TSR_ERROR_INVALID_VALUE,
                      "tsrFunctionBindOperator: operator '%s': payload %u is %s %u, but the %s array has %zu entries",
                      o->name, p, o->is_result ? "output" : "input", o->payload[p],
                      o->is_result ? "outputs" : "inputs", into ? n : 0);
    if (!desc->payload[p].data)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrFunctionBindOperator: operator '%s': payload %u has no data",
                      o->name, p);
  }
  for (uint32_t p = 0; p < o->payload_count; p++) into[o->payload[p]] = &desc->payload[p];
  return TSR_SUCCESS;
}

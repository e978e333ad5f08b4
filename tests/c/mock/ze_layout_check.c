/* ze_layout_check.c — compiled beside the official ze_api.h, checks that the Level Zero structures and
 * constants runtime/src/level_zero_driver.h declares under its own names have the official layout and values
 * (tests/c/test_gpu_loaders.py builds and runs it where the header is installed). */
#include <level_zero/ze_api.h>
#include <stddef.h>

#include "level_zero_driver.h"

#define SAME_LAYOUT(ours, theirs, field) \
  _Static_assert(offsetof(ours, field) == offsetof(theirs, field), #ours "." #field)
#define SAME_SIZE(ours, theirs) _Static_assert(sizeof(ours) == sizeof(theirs), #ours " size")

SAME_SIZE(tsr_ze_device_properties_t, ze_device_properties_t);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, type);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, maxMemAllocSize);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, numEUsPerSubslice);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, numSubslicesPerSlice);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, numSlices);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, uuid);
SAME_LAYOUT(tsr_ze_device_properties_t, ze_device_properties_t, name);
SAME_SIZE(tsr_ze_compute_properties_t, ze_device_compute_properties_t);
SAME_LAYOUT(tsr_ze_compute_properties_t, ze_device_compute_properties_t, maxSharedLocalMemory);
SAME_LAYOUT(tsr_ze_compute_properties_t, ze_device_compute_properties_t, subGroupSizes);
SAME_SIZE(tsr_ze_module_properties_t, ze_device_module_properties_t);
SAME_LAYOUT(tsr_ze_module_properties_t, ze_device_module_properties_t, spirvVersionSupported);
SAME_SIZE(tsr_ze_memory_properties_t, ze_device_memory_properties_t);
SAME_LAYOUT(tsr_ze_memory_properties_t, ze_device_memory_properties_t, totalSize);
SAME_SIZE(tsr_ze_queue_group_properties_t, ze_command_queue_group_properties_t);
SAME_LAYOUT(tsr_ze_queue_group_properties_t, ze_command_queue_group_properties_t, flags);
SAME_LAYOUT(tsr_ze_queue_group_properties_t, ze_command_queue_group_properties_t, numQueues);
SAME_SIZE(tsr_ze_context_desc_t, ze_context_desc_t);
SAME_SIZE(tsr_ze_queue_desc_t, ze_command_queue_desc_t);
SAME_LAYOUT(tsr_ze_queue_desc_t, ze_command_queue_desc_t, ordinal);
SAME_LAYOUT(tsr_ze_queue_desc_t, ze_command_queue_desc_t, mode);
SAME_LAYOUT(tsr_ze_queue_desc_t, ze_command_queue_desc_t, priority);
SAME_SIZE(tsr_ze_list_desc_t, ze_command_list_desc_t);
SAME_LAYOUT(tsr_ze_list_desc_t, ze_command_list_desc_t, commandQueueGroupOrdinal);
SAME_SIZE(tsr_ze_event_pool_desc_t, ze_event_pool_desc_t);
SAME_LAYOUT(tsr_ze_event_pool_desc_t, ze_event_pool_desc_t, count);
SAME_SIZE(tsr_ze_event_desc_t, ze_event_desc_t);
SAME_LAYOUT(tsr_ze_event_desc_t, ze_event_desc_t, wait);
SAME_SIZE(tsr_ze_module_desc_t, ze_module_desc_t);
SAME_LAYOUT(tsr_ze_module_desc_t, ze_module_desc_t, inputSize);
SAME_LAYOUT(tsr_ze_module_desc_t, ze_module_desc_t, pInputModule);
SAME_LAYOUT(tsr_ze_module_desc_t, ze_module_desc_t, pConstants);
SAME_SIZE(tsr_ze_kernel_desc_t, ze_kernel_desc_t);
SAME_LAYOUT(tsr_ze_kernel_desc_t, ze_kernel_desc_t, pKernelName);
SAME_SIZE(tsr_ze_mem_alloc_desc_t, ze_device_mem_alloc_desc_t);
SAME_LAYOUT(tsr_ze_mem_alloc_desc_t, ze_device_mem_alloc_desc_t, ordinal);
SAME_SIZE(tsr_ze_group_count_t, ze_group_count_t);

_Static_assert((int)TSR_ZE_STYPE_DEVICE_PROPERTIES == (int)ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, "stype");
_Static_assert((int)TSR_ZE_STYPE_COMPUTE_PROPERTIES == (int)ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES, "stype");
_Static_assert((int)TSR_ZE_STYPE_DEVICE_MODULE_PROPERTIES == (int)ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES, "stype");
_Static_assert((int)TSR_ZE_STYPE_COMMAND_QUEUE_GROUP_PROPERTIES == (int)ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES,
               "stype");
_Static_assert((int)TSR_ZE_STYPE_DEVICE_MEMORY_PROPERTIES == (int)ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES, "stype");
_Static_assert((int)TSR_ZE_STYPE_CONTEXT_DESC == (int)ZE_STRUCTURE_TYPE_CONTEXT_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_COMMAND_QUEUE_DESC == (int)ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_COMMAND_LIST_DESC == (int)ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_EVENT_POOL_DESC == (int)ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_EVENT_DESC == (int)ZE_STRUCTURE_TYPE_EVENT_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_DEVICE_MEM_ALLOC_DESC == (int)ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_MODULE_DESC == (int)ZE_STRUCTURE_TYPE_MODULE_DESC, "stype");
_Static_assert((int)TSR_ZE_STYPE_KERNEL_DESC == (int)ZE_STRUCTURE_TYPE_KERNEL_DESC, "stype");
_Static_assert((int)TSR_ZE_INIT_FLAG_GPU_ONLY == (int)ZE_INIT_FLAG_GPU_ONLY, "flag");
_Static_assert((int)TSR_ZE_DEVICE_TYPE_GPU == (int)ZE_DEVICE_TYPE_GPU, "enum");
_Static_assert((int)TSR_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE == (int)ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE, "flag");
_Static_assert((int)TSR_ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS == (int)ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, "enum");
_Static_assert((int)TSR_ZE_EVENT_POOL_FLAG_HOST_VISIBLE == (int)ZE_EVENT_POOL_FLAG_HOST_VISIBLE, "flag");
_Static_assert((int)TSR_ZE_EVENT_SCOPE_FLAG_HOST == (int)ZE_EVENT_SCOPE_FLAG_HOST, "flag");
_Static_assert((int)TSR_ZE_MODULE_FORMAT_IL_SPIRV == (int)ZE_MODULE_FORMAT_IL_SPIRV, "enum");
_Static_assert((int)TSR_ZE_RESULT_ERROR_UNINITIALIZED == (int)ZE_RESULT_ERROR_UNINITIALIZED, "result");
_Static_assert((int)TSR_ZE_RESULT_ERROR_MODULE_BUILD_FAILURE == (int)ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "result");
_Static_assert((int)TSR_ZE_RESULT_ERROR_INVALID_KERNEL_NAME == (int)ZE_RESULT_ERROR_INVALID_KERNEL_NAME, "result");

int main(void) { return 0; }

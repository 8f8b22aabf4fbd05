/* TEMPORARY stub until the dev-sim branch lands. */
#include "sim.h"
#include "../cpu/cpu.h"
const device_vtable sim_vtable = {.name = "sim", .async = 1, .kernels = cpu_kernels};
device_obj *sim_device_new(int id)
{
    (void)id;
    return NULL;
}

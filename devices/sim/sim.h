/* TEMPORARY stub until the dev-sim branch lands. */
#ifndef GR_SIM_H
#define GR_SIM_H
#include "../device.h"
extern const device_vtable sim_vtable;
device_obj *sim_device_new(int id);
#endif

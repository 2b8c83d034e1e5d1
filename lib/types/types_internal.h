/* Helpers shared by the files of the types module. */
#ifndef PATHWAYS_TYPES_TYPES_INTERNAL_H_
#define PATHWAYS_TYPES_TYPES_INTERNAL_H_

#include "pathways/types.h"

/* Size of mesh axis |axis| (PW_MESH_AXIS_ALL: the device count); 0 when
 * out of range. */
uint32_t pw__mesh_axis_size(const pw_mesh_shape_t* mesh, uint32_t axis);

/* The tile list of any kind of sharding (the header of sharding.c says
 * how SPLIT and REPLICATED read as tiles): fills |tiles| (PW_MAX_MESH_RANK
 * entries) and |*out_unreduced|, returns the count. */
uint32_t pw__sharding_tiles(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                            pw_sharding_tile_t* tiles, uint32_t* out_unreduced);

/* The checks of a TILED sharding that need only the array's rank: axes in
 * range, each mesh axis used once. */
pw_status_t pw__sharding_check_axes(const pw_sharding_t* sharding, uint32_t rank,
                                    const pw_mesh_shape_t* mesh);

#endif /* PATHWAYS_TYPES_TYPES_INTERNAL_H_ */

// expect-error: 3:3: linalg.pack: outer_dims_perm [0, 0] must name distinct dims
func.func @f(%a: tensor<8x8xf32>, %d: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
  %p = linalg.pack %a outer_dims_perm = [0, 0] inner_dims_pos = [0, 1] inner_tiles = [4, 4] into %d : tensor<8x8xf32> -> tensor<2x2x4x4xf32>
  return %p : tensor<2x2x4x4xf32>
}

// expect-error: 3:3: linalg.generic: operand #0 has rank 2 but its indexing map has 1 results
func.func @f(%a: tensor<4x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x3xf32>) outs(%c : tensor<4x3xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

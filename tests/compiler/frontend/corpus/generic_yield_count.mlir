// expect-error: 6:5: linalg.yield yields 2 value(s) but linalg.generic has 1 output(s)
func.func @f(%a: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%c : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x, %y : f32, f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// expect-error: 3:3: linalg.generic: loop d0 has extent 4 (operand #0 dim 0) but operand #1 dim 0 is 5
func.func @f(%a: tensor<4xf32>, %c: tensor<5xf32>) -> tensor<5xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%c : tensor<5xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}

// expect-error: 6:5: linalg.yield value #0 is i32 but output #0 of linalg.generic has element type f32
func.func @f(%a: tensor<4xi32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xi32>) outs(%c : tensor<4xf32>) {
  ^bb0(%x: i32, %y: f32):
    linalg.yield %x : i32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

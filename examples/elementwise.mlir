// y = exp(-x * x) * w + max(x, 0)   (w broadcast along rows)
// t = transpose(x) as i32 (truncated toward zero)
#rows = affine_map<(d0, d1) -> (d0, d1)>
#bcast = affine_map<(d0, d1) -> (d1)>
#trans = affine_map<(d0, d1) -> (d1, d0)>
func.func @main(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4x2xi32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %y = linalg.generic {indexing_maps = [#rows, #bcast, #rows],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %w : tensor<2x4xf32>, tensor<4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %sq = arith.mulf %a, %a : f32
    %neg = arith.negf %sq : f32
    %g = math.exp %neg : f32
    %gw = arith.mulf %g, %b : f32
    %relu = arith.maximumf %a, %zero : f32
    %r = arith.addf %gw, %relu : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<4x2xi32>
  %t = linalg.generic {indexing_maps = [#trans, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e2 : tensor<4x2xi32>) {
  ^bb0(%a: f32, %out: i32):
    %i = arith.fptosi %a : f32 to i32
    linalg.yield %i : i32
  } -> tensor<4x2xi32>
  return %y, %t : tensor<2x4xf32>, tensor<4x2xi32>
}

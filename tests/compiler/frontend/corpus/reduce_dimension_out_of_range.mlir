// expect-error: 4:3: linalg.reduce: dimensions [2] must be distinct dims of the rank-2 input
func.func @f(%a: tensor<3x4xf32>) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3xf32>
  %r = linalg.reduce ins(%a : tensor<3x4xf32>) outs(%e : tensor<3xf32>) dimensions = [2]
    (%x: f32, %y: f32) {
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
    }
  return %r : tensor<3xf32>
}

// expect-error: 4:3: linalg.broadcast: dimensions [7] must be distinct dims of the rank-2 output
func.func @f(%a: tensor<3xf32>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.broadcast ins(%a : tensor<3xf32>) outs(%e : tensor<3x4xf32>) dimensions = [7]
  return %r : tensor<3x4xf32>
}

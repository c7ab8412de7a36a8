// expect-error: 4:3: linalg.transpose: permutation [0, 0] is not a permutation
func.func @f(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %e = tensor.empty() : tensor<3x2xf32>
  %r = linalg.transpose ins(%a : tensor<2x3xf32>) outs(%e : tensor<3x2xf32>) permutation = [0, 0]
  return %r : tensor<3x2xf32>
}
